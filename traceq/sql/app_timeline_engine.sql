-- App timeline: engine state per window of $bucket_ns in [$since, $until): mean running and
-- waiting requests, peak KV-cache usage, and preemptions (events of kind 'preemption' plus
-- the requests' own preemption counts are not mixed: this counts events only).
WITH stats AS (
    SELECT
        ts // $bucket_ns * $bucket_ns AS ts,
        avg(running) AS running,
        avg(waiting) AS waiting,
        max(kv_usage) AS kv_usage
    FROM engine_stats
    WHERE ts >= $since AND ts < $until
    GROUP BY 1
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
