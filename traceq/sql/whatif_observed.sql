-- `traceq whatif` (traceq/whatif/predict.py): the run's own KPIs that the back-test compares a
-- replay with, one row, over the successful server requests (whatif_requests.sql's completed
-- rows): TTFT and TPOT percentiles (quantile_cont, docs/METRICS.md), SLO attainment and goodput as
-- traceq report defines them ($slo_ttft_ms, $slo_tpot_ms, $slo_e2e_ms; null: no limit),
-- output tokens per second over first arrival to last token. TBT comes from kpi_latency
-- (traceq/sql/whatif_observed_tbt.sql), read only where the back-test table shows it.
WITH r AS (
    SELECT
        *,
        ($slo_ttft_ms IS NULL OR ttft_ms <= $slo_ttft_ms)
        AND ($slo_tpot_ms IS NULL OR tpot_ms IS NULL OR tpot_ms <= $slo_tpot_ms)
        AND ($slo_e2e_ms IS NULL OR e2e_ms <= $slo_e2e_ms) AS good
    FROM request_phases
    WHERE view = 'server' AND error IS NULL AND prompt_tokens > 0 AND output_tokens > 0
      AND ttft_ns IS NOT NULL
)
SELECT
    count(*) AS requests,
    quantile_cont(ttft_ms, [0.5, 0.9, 0.99, 0.999]) AS ttft_q,
    max(ttft_ms) AS ttft_max,
    quantile_cont(tpot_ms, [0.5, 0.9, 0.99, 0.999]) AS tpot_q,
    max(tpot_ms) AS tpot_max,
    avg(CASE WHEN coalesce(good, false) THEN 1.0 ELSE 0.0 END) AS attainment,
    count(*) FILTER (WHERE coalesce(good, false))
        / nullif((max(t_arrival + e2e_ns) - min(t_arrival)) / 1e9, 0) AS goodput_rps,
    sum(output_tokens) / nullif((max(t_arrival + e2e_ns) - min(t_arrival)) / 1e9, 0)
        AS output_tokens_per_s,
    (max(t_arrival + e2e_ns) - min(t_arrival)) / 1e9 AS window_s
FROM r
