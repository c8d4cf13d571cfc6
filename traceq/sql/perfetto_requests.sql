-- `traceq export --format perfetto` (traceq/perfetto.py): the requests that arrived in
-- [$since, $until) as Chrome JSON trace events, one JSON object per row. Each request is its
-- own track (pid 1, tid = rank by arrival; thread_name = request id) holding a `request`
-- slice over its e2e time and, nested inside, one slice per phase (tokenize, queue, prefill,
-- decode) laid end to end from arrival. Times are µs since $origin (ns).
WITH req AS (
    SELECT *, row_number() OVER (ORDER BY t_arrival, request_id) AS tid
    FROM request_phases
    WHERE t_arrival >= $since AND t_arrival < $until
),
slices AS (
    SELECT tid, 0 AS ord, 'request' AS name, t_arrival AS t, e2e_ns AS d,
        json_object(
            'request_id', request_id, 'prompt_tokens', prompt_tokens,
            'output_tokens', output_tokens, 'ttft_ms', ttft_ms, 'tpot_ms', tpot_ms,
            'e2e_ms', e2e_ms, 'finish_reason', finish_reason, 'error', error
        ) AS args
    FROM req
    UNION ALL
    SELECT tid, 1, 'tokenize', t_arrival, tokenize_ns, json_object('ms', tokenize_ms) FROM req
    UNION ALL
    SELECT tid, 2, 'queue', t_arrival + coalesce(tokenize_ns, 0), queue_ns,
        json_object('ms', queue_ms)
    FROM req
    UNION ALL
    SELECT tid, 3, 'prefill', t_arrival + coalesce(tokenize_ns, 0) + coalesce(queue_ns, 0),
        prefill_ns, json_object('ms', prefill_ms)
    FROM req
    UNION ALL
    SELECT tid, 4, 'decode', t_arrival + ttft_ns, decode_ns, json_object('ms', decode_ms)
    FROM req
)
SELECT event
FROM (
    SELECT tid, -1 AS ord, json_object(
        'ph', 'M', 'pid', 1, 'tid', tid, 'name', 'thread_name',
        'args', json_object('name', request_id)
    ) AS event
    FROM req
    UNION ALL
    SELECT tid, ord, json_object(
        'ph', 'X', 'pid', 1, 'tid', tid, 'name', name, 'cat', 'phase',
        'ts', (t - $origin) / 1000.0, 'dur', greatest(d, 0) / 1000.0, 'args', args
    )
    FROM slices
    WHERE t IS NOT NULL AND d IS NOT NULL
)
ORDER BY tid, ord
