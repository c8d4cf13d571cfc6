-- `traceq export --format perfetto`: every streamed chunk of the requests that arrived in
-- [$since, $until) as an instant event on its request's track (pid 1, the tid of
-- perfetto_requests.sql), with the chunk's tokens and the gap before it. µs since $origin.
WITH req AS (
    SELECT request_id, source_id, row_number() OVER (ORDER BY t_arrival, request_id) AS tid
    FROM request_phases
    WHERE t_arrival >= $since AND t_arrival < $until
)
SELECT json_object(
    'ph', 'i', 's', 't', 'pid', 1, 'tid', r.tid, 'name', 'token', 'cat', 'token',
    'ts', (g.ts - $origin) / 1000.0,
    'args', json_object('idx', g.idx, 'n_tokens', g.n_tokens, 'tbt_ms', g.tbt_ms)
) AS event
FROM token_gaps AS g
JOIN req AS r USING (request_id, source_id)
ORDER BY r.tid, g.idx
