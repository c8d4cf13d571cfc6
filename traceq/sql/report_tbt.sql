-- `traceq report`: pooled TBT percentiles over every chunk gap (token_gaps, as kpi_latency).
SELECT
    count(tbt_ms) AS gaps,
    avg(tbt_ms) AS tbt_mean,
    quantile_cont(tbt_ms, [0.5, 0.9, 0.95, 0.99]) AS tbt_q
FROM token_gaps;
