-- `traceq export --format perfetto`: engine stats (pid 2, per instance and engine) and GPU
-- series (pid 3, per GPU) in [$since, $until) as counter events, and the dataset's events
-- (pid 4) as instants. µs since $origin.
SELECT json_object(
    'ph', 'C', 'pid', 2, 'ts', (ts - $origin) / 1000.0,
    'name', 'requests ' || coalesce(instance, '') || ' engine ' || CAST(engine AS VARCHAR),
    'args', json_object('running', running, 'waiting', waiting)
) AS event
FROM engine_stats
WHERE ts >= $since AND ts < $until AND (running IS NOT NULL OR waiting IS NOT NULL)
UNION ALL
SELECT json_object(
    'ph', 'C', 'pid', 2, 'ts', (ts - $origin) / 1000.0,
    'name', 'KV usage ' || coalesce(instance, '') || ' engine ' || CAST(engine AS VARCHAR),
    'args', json_object('kv_usage', kv_usage)
)
FROM engine_stats
WHERE ts >= $since AND ts < $until AND kv_usage IS NOT NULL
UNION ALL
SELECT json_object(
    'ph', 'C', 'pid', 3, 'ts', (ts - $origin) / 1000.0, 'name', 'activity ' || gpu_key,
    'args', json_object(
        'sm_active', coalesce(sm_active, util_gpu / 100.0),
        'dram_active', coalesce(dram_active, util_mem / 100.0)
    )
)
FROM gpu_state
WHERE ts >= $since AND ts < $until
UNION ALL
SELECT json_object(
    'ph', 'C', 'pid', 3, 'ts', (ts - $origin) / 1000.0, 'name', 'power W ' || gpu_key,
    'args', json_object('power_w', power_w)
)
FROM gpu_state
WHERE ts >= $since AND ts < $until AND power_w IS NOT NULL
UNION ALL
SELECT json_object(
    'ph', 'C', 'pid', 3, 'ts', (ts - $origin) / 1000.0, 'name', 'SM clock MHz ' || gpu_key,
    'args', json_object('sm_clock_mhz', sm_clock_mhz)
)
FROM gpu_state
WHERE ts >= $since AND ts < $until AND sm_clock_mhz IS NOT NULL
UNION ALL
SELECT json_object(
    'ph', 'i', 's', 'p', 'pid', 4, 'tid', 0, 'ts', (ts - $origin) / 1000.0, 'name', kind,
    'cat', coalesce(severity, 'INFO'),
    'args', json_object('message', message, 'request_id', request_id, 'value', value)
)
FROM events
WHERE ts >= $since AND ts < $until AND kind <> 'http'
