-- `traceq whatif` (traceq/whatif/limits.py): the engine's start-up lines that set a limit, one
-- row each: the setting events (events.kind 'setting_*', numeric value), the KV cache size,
-- the GPU block count, the version and the engine-config line (which prints chunked prefill
-- and prefix caching), with the file and line they came from. Latest line first.
SELECT
    e.kind,
    e.value,
    e.message,
    e.instance,
    e.line,
    regexp_extract(coalesce(s.path, ''), '[^/\\]*$') AS file
FROM events e
LEFT JOIN sources s USING (source_id)
WHERE e.kind LIKE 'setting\_%' ESCAPE '\'
   OR e.kind IN ('startup_kv_tokens', 'startup_gpu_blocks', 'startup_version',
                 'startup_engine_config')
ORDER BY e.ts DESC, e.line DESC
