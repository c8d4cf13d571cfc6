-- `traceq report`: engine and GPU figures, one row. Preemptions come from the requests'
-- n_preemptions when any row records it, else from `preemption` events; null when neither
-- source records preemptions (unknown, not zero). GPUs are the distinct GPU keys of gpu_state.
SELECT
    (SELECT max(kv_usage) FROM engine_stats) AS peak_kv_usage,
    (SELECT max(waiting) FROM engine_stats) AS peak_waiting,
    (SELECT max(running) FROM engine_stats) AS peak_running,
    CAST(coalesce(
        (SELECT sum(n_preemptions) FROM requests),
        (SELECT CASE WHEN count(*) > 0 THEN count(*) END FROM events WHERE kind = 'preemption')
    ) AS BIGINT) AS preemptions,
    (SELECT count(DISTINCT gpu_key) FROM gpu_state) AS gpus,
    (SELECT count(*) FROM engine_stats) AS engine_samples;
