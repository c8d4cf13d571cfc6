-- App timeline markers: events per window of $bucket_ns and marker class in [$since, $until).
-- Classes: startup (startup_* and cuda_graph), preemption, error (kind error / oom, or
-- severity ERROR / CRITICAL), engine_death; routine kinds (http access lines, otel:*) are
-- left out. At most $limit rows, the busiest first.
WITH classed AS (
    SELECT
        ts,
        CASE
            WHEN kind IN ('engine_dead', 'engine_start_failed') THEN 'engine death'
            WHEN kind = 'preemption' THEN 'preemption'
            WHEN kind IN ('error', 'oom', 'kv_cache_insufficient') OR severity IN ('ERROR', 'CRITICAL') THEN 'error'
            WHEN starts_with(kind, 'startup') OR starts_with(kind, 'cuda_graph') THEN 'start-up'
        END AS marker,
        kind,
        message
    FROM events
    WHERE ts >= $since AND ts < $until
)
SELECT
    ts // $bucket_ns * $bucket_ns AS ts,
    marker,
    count(*) AS n,
    string_agg(DISTINCT kind, ', ' ORDER BY kind) AS kinds,
    any_value(message) AS example
FROM classed
WHERE marker IS NOT NULL
GROUP BY 1, 2
ORDER BY n DESC, ts
LIMIT $limit
