-- The GPU the data measured: each model name the GPU samples carry (nvidia-smi `name`,
-- DCGM `modelName`), most sampled first, with how many GPUs carried it; and from the
-- engine's start-up lines (the latest of each): its tensor-parallel size, the weights one
-- GPU holds (GiB), the prefill token budget of a step (max_num_batched_tokens), whether
-- chunked prefill is on (1), off (0) or not printed (null), and whether SGLang's scheduler
-- lines are in the data (its default chunk differs from vLLM's).
WITH chunked AS (
    -- the latest line that prints it; in one second, the later line (the engine config,
    -- which holds the value in effect, follows the arguments asked for)
    SELECT CASE WHEN message LIKE '%=True' THEN 1 ELSE 0 END AS chunked
    FROM events
    WHERE kind = 'setting_chunked_prefill'
        AND (message LIKE '%=True' OR message LIKE '%=False')
    ORDER BY ts DESC, line DESC
    LIMIT 1
),
startup AS (
    SELECT
        arg_max(value, ts) FILTER (WHERE kind = 'setting_tensor_parallel_size') AS tp,
        arg_max(value, ts) FILTER (WHERE kind = 'startup_model_load_gib') AS weights_gib,
        arg_max(value, ts) FILTER (WHERE kind = 'setting_max_num_batched_tokens') AS budget,
        (SELECT any_value(chunked) FROM chunked) AS chunked,
        (SELECT count(*) > 0 FROM engine_stats WHERE batch IS NOT NULL) AS sglang
    FROM events
    WHERE kind IN ('setting_tensor_parallel_size', 'startup_model_load_gib',
                   'setting_max_num_batched_tokens')
        AND value > 0
)
SELECT
    trim(g.model_name) AS model_name,
    count(*) AS samples,
    count(DISTINCT coalesce(g.host, '') || '/' || coalesce(CAST(g.gpu AS VARCHAR), g.uuid, ''))
        AS gpus,
    any_value(s.tp) AS tp,
    any_value(s.weights_gib) AS weights_gib,
    any_value(s.budget) AS budget,
    any_value(s.chunked) AS chunked,
    any_value(s.sglang) AS sglang
FROM gpu_samples AS g, startup AS s
WHERE g.model_name IS NOT NULL AND trim(g.model_name) <> ''
GROUP BY trim(g.model_name)
UNION ALL
-- no GPU samples: still the start-up figures
SELECT NULL, 0, 0, s.tp, s.weights_gib, s.budget, s.chunked, s.sglang
FROM startup AS s
WHERE NOT EXISTS (SELECT 1 FROM gpu_samples WHERE model_name IS NOT NULL)
ORDER BY samples DESC, model_name
