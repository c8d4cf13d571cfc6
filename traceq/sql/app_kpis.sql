-- App overview KPIs for the requests that arrived in [$since, $until) (ns), one row.
-- Metric definitions: docs/METRICS.md. Percentiles are linear (quantile_cont). Goodput counts
-- completed requests meeting every SLO ($slo_ttft_ms, $slo_tpot_ms, $slo_e2e_ms; a request
-- with one output token has no TPOT and passes that SLO). GPU-hours take the GPUs seen in
-- gpu_samples over the window ($default_gpus when there are none) times the window length.
WITH req AS (
    SELECT *
    FROM request_phases
    WHERE t_arrival >= $since AND t_arrival < $until
),
gaps AS (
    SELECT tbt_ms
    FROM token_gaps
    WHERE ts >= $since AND ts < $until
),
gpus AS (
    SELECT count(DISTINCT coalesce(uuid, coalesce(host, '') || ':' || CAST(gpu AS VARCHAR))) AS n
    FROM gpu_samples
    WHERE ts >= $since AND ts < $until AND coalesce(entity, 'GPU') = 'GPU'
),
totals AS (
    SELECT
        count(*) AS requests,
        count(error) AS errors,
        count(*) FILTER (
            WHERE error IS NULL AND t_arrival + e2e_ns IS NOT NULL
                AND ttft_ms <= $slo_ttft_ms
                AND (tpot_ms IS NULL OR tpot_ms <= $slo_tpot_ms)
                AND e2e_ms <= $slo_e2e_ms
        ) AS good,
        CAST(sum(output_tokens) AS BIGINT) AS output_tokens,
        (max(t_arrival + e2e_ns) - min(t_arrival)) / 1e9 AS duration_s,
        quantile_cont(ttft_ms, 0.5) AS ttft_p50,
        quantile_cont(ttft_ms, 0.99) AS ttft_p99,
        quantile_cont(tpot_ms, 0.5) AS tpot_p50,
        quantile_cont(tpot_ms, 0.99) AS tpot_p99,
        quantile_cont(e2e_ms, 0.5) AS e2e_p50,
        quantile_cont(e2e_ms, 0.99) AS e2e_p99
    FROM req
)
SELECT
    t.*,
    (SELECT quantile_cont(tbt_ms, 0.5) FROM gaps) AS tbt_p50,
    (SELECT quantile_cont(tbt_ms, 0.99) FROM gaps) AS tbt_p99,
    t.requests / nullif(t.duration_s, 0) AS requests_per_s,
    t.output_tokens / nullif(t.duration_s, 0) AS output_tokens_per_s,
    t.good / nullif(t.duration_s, 0) AS goodput_per_s,
    t.good / nullif(t.requests, 0) AS slo_attainment,
    t.errors / nullif(t.requests, 0) AS error_rate,
    CASE WHEN g.n > 0 THEN g.n ELSE $default_gpus END AS gpus,
    CASE WHEN g.n > 0 THEN g.n ELSE $default_gpus END * t.duration_s / 3600.0 * $price_per_gpu_hour
        / nullif(t.output_tokens, 0) * 1e6 AS cost_per_m_output_tokens
FROM totals AS t
CROSS JOIN gpus AS g
