-- `traceq whatif` (traceq/whatif/predict.py): the run's TBT percentiles the back-test table
-- shows beside the replay's, one row, from kpi_latency (every chunk gap; docs/METRICS.md).
-- Kept apart from whatif_observed.sql: the report's Headroom and the app need only that
-- file's figures, and this pass over every gap is most of the time of both.
SELECT p50 AS tbt_p50, p90 AS tbt_p90, p99 AS tbt_p99, max AS tbt_max
FROM kpi_latency
WHERE metric = 'tbt_ms'
