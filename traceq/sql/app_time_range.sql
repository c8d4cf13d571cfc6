-- App (traceq/app/queries.py): the dataset's time range over every timed table, and the
-- requests' own range (the default window of the time axis). ns since the Unix epoch (UTC).
WITH stamps AS (
    SELECT min(t_arrival) AS lo, max(coalesce(t_last_token, t_first_token, t_arrival)) AS hi
    FROM requests
    UNION ALL
    SELECT min(ts), max(ts) FROM engine_stats
    UNION ALL
    SELECT min(ts), max(ts) FROM events
    UNION ALL
    SELECT min(ts), max(ts) FROM gpu_samples
)
SELECT
    (SELECT min(lo) FROM stamps) AS start_ns,
    (SELECT max(hi) FROM stamps) AS end_ns,
    (SELECT min(t_arrival) FROM requests) AS requests_start_ns,
    (SELECT max(coalesce(t_last_token, t_first_token, t_arrival)) FROM requests)
        AS requests_end_ns
