-- App timeline: per window of $bucket_ns (aligned on multiples since the epoch) in
-- [$since, $until): arrivals, request rate, TTFT percentiles of the requests that arrived in
-- it, and TBT percentiles of the chunks that came in it. At most (until - since) / bucket rows.
WITH arrivals AS (
    SELECT
        t_arrival // $bucket_ns * $bucket_ns AS ts,
        count(*) AS requests,
        count(error) AS errors,
        quantile_cont(ttft_ms, 0.5) AS ttft_p50_ms,
        quantile_cont(ttft_ms, 0.99) AS ttft_p99_ms
    FROM request_phases
    WHERE t_arrival >= $since AND t_arrival < $until
    GROUP BY 1
),
gaps AS (
    SELECT
        ts // $bucket_ns * $bucket_ns AS ts,
        quantile_cont(tbt_ms, 0.5) AS tbt_p50_ms,
        quantile_cont(tbt_ms, 0.99) AS tbt_p99_ms
    FROM token_gaps
    WHERE ts >= $since AND ts < $until AND tbt_ms IS NOT NULL
    GROUP BY 1
)
SELECT
    ts,
    coalesce(a.requests, 0) AS requests,
    coalesce(a.errors, 0) AS errors,
    coalesce(a.requests, 0) / ($bucket_ns / 1e9) AS requests_per_s,
    a.ttft_p50_ms,
    a.ttft_p99_ms,
    g.tbt_p50_ms,
    g.tbt_p99_ms
FROM arrivals AS a
FULL JOIN gaps AS g USING (ts)
ORDER BY ts
