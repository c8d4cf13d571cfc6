-- `traceq report`: engine stats on a time axis in $buckets equal windows over the engine
-- samples' own span: peak KV usage and peak waiting / running requests per window.
WITH span AS (
    SELECT min(ts) AS t0, max(ts) AS t1 FROM engine_stats
)
SELECT
    t0 + least(CAST((ts - t0) * $buckets // nullif(t1 - t0, 0) AS BIGINT), $buckets - 1)
    * ((t1 - t0) // $buckets) AS ts,
    max(kv_usage) AS kv_usage,
    max(waiting) AS waiting,
    max(running) AS running
FROM engine_stats, span
GROUP BY 1
ORDER BY 1;
