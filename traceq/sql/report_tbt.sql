-- `traceq report`: pooled TBT over every chunk gap (token_gaps, as kpi_latency): the count, the
-- mean and the four percentiles of _tbt_stats (traceq/sql/views.sql), which equal
-- quantile_cont(tbt_ms, q) in memory that does not grow with the chunks (quantile_cont itself
-- holds every gap: ~1 GB at 56 M gaps). The mean is the exact integer sum over the count. Read
-- through _kpi_stats: the same row, stored at ingest for a large dataset (traceq/stored_kpis.py).
SELECT
    s.n AS gaps,
    s.mean AS tbt_mean,
    s.q AS tbt_q
FROM _kpi_stats
WHERE k = 3;
