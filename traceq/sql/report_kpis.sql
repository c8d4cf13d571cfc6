-- `traceq report`: the request-level KPIs of a dataset, one row (docs/METRICS.md, docs/REPORT.md);
-- the latency percentiles are report_latency.sql's, one column at a time. A request meets the SLOs when it succeeded and its
-- TTFT, TPOT and e2e are each at most the SLO ($slo_ttft_ms, $slo_tpot_ms, $slo_e2e_ms; a null
-- SLO is no limit, a null TPOT (<= 1 output token) meets the TPOT SLO, as vLLM bench's goodput).
WITH r AS (
    SELECT
        *,
        error IS NULL
        AND ($slo_ttft_ms IS NULL OR ttft_ms <= $slo_ttft_ms)
        AND ($slo_tpot_ms IS NULL OR tpot_ms IS NULL OR tpot_ms <= $slo_tpot_ms)
        AND ($slo_e2e_ms IS NULL OR e2e_ms <= $slo_e2e_ms) AS good
    FROM request_phases
)
SELECT
    count(*) AS requests,
    count(error) AS errors,
    count(*) FILTER (WHERE coalesce(good, false)) AS good_requests,
    count(ttft_ms) AS ttft_measured,
    min(t_arrival) AS t_start,
    max(t_arrival + e2e_ns) AS t_end,
    (max(t_arrival + e2e_ns) - min(t_arrival)) / 1e9 AS duration_s,
    CAST(sum(output_tokens) AS BIGINT) AS output_tokens,
    CAST(sum(prompt_tokens) AS BIGINT) AS prompt_tokens,
    avg(ttft_ms) AS ttft_mean,
    avg(tpot_ms) AS tpot_mean,
    avg(e2e_ms) AS e2e_mean
FROM r;
