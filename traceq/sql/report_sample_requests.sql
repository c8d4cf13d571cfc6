-- `traceq report`: a bounded, uniform, deterministic sample of requests (at most $cap rows,
-- picked by a hash of the request id and $seed, so the same dataset always gives the same
-- sample). The baseline keeps it to compare distributions (bootstrap, docs/REPORT.md); the
-- charts draw the request profile from it. `good` as in report_kpis.sql. Rows come in arrival
-- order: the comparison resamples blocks of neighbouring requests (docs/REPORT.md). Only
-- requests whose hash is at most $max_hash are sorted, as in report_sample_gaps.sql.
WITH picked AS (
SELECT
    hash(request_id, $seed) AS h,
    request_id,
    t_arrival,
    ttft_ms,
    tpot_ms,
    e2e_ms,
    prompt_tokens,
    output_tokens,
    CAST(error IS NOT NULL AS INTEGER) AS is_error,
    CAST(coalesce(
        error IS NULL
        AND ($slo_ttft_ms IS NULL OR ttft_ms <= $slo_ttft_ms)
        AND ($slo_tpot_ms IS NULL OR tpot_ms IS NULL OR tpot_ms <= $slo_tpot_ms)
        AND ($slo_e2e_ms IS NULL OR e2e_ms <= $slo_e2e_ms), false) AS INTEGER) AS is_good
FROM request_phases
WHERE hash(request_id, $seed) <= $max_hash
ORDER BY h, request_id
LIMIT $cap
)
SELECT * EXCLUDE (h, request_id, t_arrival) FROM picked ORDER BY t_arrival, h, request_id;
