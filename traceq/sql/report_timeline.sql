-- `traceq report`: the run on a time axis in $buckets equal windows from the first arrival to
-- the last token. Per window: requests in flight at its start (concurrency), requests and output
-- tokens completed in it (per second), the requests completed in it that met every SLO (per
-- second; SLO parameters as report_kpis.sql), and the median and p95 TTFT of the requests
-- arriving in it. The comparison resamples these windows for the throughput KPIs.
WITH span AS (
    SELECT min(t_arrival) AS t0, max(t_arrival + e2e_ns) AS t1 FROM request_phases
),
grid AS (
    SELECT
        b,
        t0 + (t1 - t0) * b // $buckets AS ts,
        t0 + (t1 - t0) * (b + 1) // $buckets AS ts_end
    FROM span, range(CAST($buckets AS BIGINT)) AS g(b)
    WHERE t1 > t0
),
-- requests in flight at each window's start: those arrived at or before it less those
-- completed at or before it. Each arrival (+1) and completion (-1) counts from the first window
-- start at or after it, window b starting at t0 + floor((t1 - t0) * b / $buckets), so from
-- window ceil((ts - t0) * $buckets / (t1 - t0)); a running sum over the windows then gives the
-- level, in memory of $buckets rows whatever the requests (not a sort of every edge).
edges AS (
    SELECT t_arrival AS ts, 1 AS d FROM request_phases WHERE e2e_ns IS NOT NULL
    UNION ALL
    SELECT t_arrival + e2e_ns, -1 FROM request_phases WHERE e2e_ns IS NOT NULL
),
steps AS (
    SELECT
        CASE
            WHEN ts <= t0 THEN 0
            ELSE ((ts - t0) * $buckets + (t1 - t0) - 1) // (t1 - t0)
        END AS b,
        sum(d) AS d
    FROM edges, span
    WHERE t1 > t0
    GROUP BY 1
),
level AS (
    SELECT g.b, CAST(sum(coalesce(s.d, 0)) OVER (ORDER BY g.b) AS BIGINT) AS in_flight
    FROM grid AS g
    LEFT JOIN steps AS s USING (b)
),
done AS (
    SELECT
        least(CAST(((t_arrival + e2e_ns) - t0) * $buckets // nullif(t1 - t0, 0) AS BIGINT),
              $buckets - 1) AS b,
        count(*) AS completed,
        count(*) FILTER (
            WHERE error IS NULL
            AND ($slo_ttft_ms IS NULL OR ttft_ms <= $slo_ttft_ms)
            AND ($slo_tpot_ms IS NULL OR tpot_ms IS NULL OR tpot_ms <= $slo_tpot_ms)
            AND ($slo_e2e_ms IS NULL OR e2e_ms <= $slo_e2e_ms)
        ) AS good,
        CAST(sum(output_tokens) AS BIGINT) AS output_tokens
    FROM request_phases, span
    WHERE e2e_ns IS NOT NULL
    GROUP BY 1
),
arrived AS (
    SELECT
        least(CAST((t_arrival - t0) * $buckets // nullif(t1 - t0, 0) AS BIGINT),
              $buckets - 1) AS b,
        -- one quantile state for both (two would each hold every TTFT)
        quantile_cont(ttft_ms, [0.5, 0.95]) AS ttft_q
    FROM request_phases, span
    GROUP BY 1
)
SELECT
    g.ts,
    l.in_flight,
    coalesce(d.completed, 0) / ((g.ts_end - g.ts) / 1e9) AS requests_per_s,
    coalesce(d.output_tokens, 0) / ((g.ts_end - g.ts) / 1e9) AS output_tokens_per_s,
    coalesce(d.good, 0) / ((g.ts_end - g.ts) / 1e9) AS good_per_s,
    a.ttft_q[1] AS ttft_p50_ms,
    a.ttft_q[2] AS ttft_p95_ms
FROM grid AS g
JOIN level AS l USING (b)
LEFT JOIN done AS d USING (b)
LEFT JOIN arrived AS a USING (b)
ORDER BY g.ts;
