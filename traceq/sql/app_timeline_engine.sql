-- App timeline: engine state per window of $bucket_ns in [$since, $until): running and waiting
-- requests (the mean over the window per instance and engine, summed over them), peak
-- KV-cache usage, and preemption events. Stats lines are sparse (vLLM prints one every 10 s),
-- so the last sample before the window is carried to its start and the last sample inside it
-- to its end, when no older than $carry_ns: a zoomed window still shows the engine's state.
WITH inside AS (
    SELECT ts, instance, engine, running, waiting, kv_usage
    FROM engine_stats
    WHERE ts >= $since AND ts < $until
),
carried AS (
    SELECT $since AS ts, instance, engine, running, waiting, kv_usage
    FROM engine_stats
    WHERE ts < $since AND ts >= $since - $carry_ns
    QUALIFY row_number() OVER (PARTITION BY instance, engine ORDER BY ts DESC) = 1
    UNION ALL
    SELECT $until - 1, instance, engine, running, waiting, kv_usage
    FROM engine_stats
    WHERE ts < $until AND ts >= $until - $carry_ns
    QUALIFY row_number() OVER (PARTITION BY instance, engine ORDER BY ts DESC) = 1
),
per_engine AS (
    SELECT
        ts // $bucket_ns * $bucket_ns AS ts,
        instance,
        engine,
        avg(running) AS running,
        avg(waiting) AS waiting,
        max(kv_usage) AS kv_usage
    FROM (SELECT * FROM inside UNION ALL SELECT * FROM carried)
    GROUP BY ALL
),
stats AS (
    SELECT ts, sum(running) AS running, sum(waiting) AS waiting, max(kv_usage) AS kv_usage
    FROM per_engine
    GROUP BY ts
),
preempt AS (
    SELECT ts // $bucket_ns * $bucket_ns AS ts, count(*) AS preemptions
    FROM events
    WHERE ts >= $since AND ts < $until AND kind = 'preemption'
    GROUP BY 1
)
SELECT ts, s.running, s.waiting, s.kv_usage, coalesce(p.preemptions, 0) AS preemptions
FROM stats AS s
FULL JOIN preempt AS p USING (ts)
ORDER BY ts
