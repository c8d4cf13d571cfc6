-- App: the slowest requests by e2e that arrived in [$since, $until) (the waterfall's picker),
-- at most $limit.
SELECT request_id, e2e_ms, ttft_ms, prompt_tokens, output_tokens, error
FROM request_phases
WHERE t_arrival >= $since AND t_arrival < $until
ORDER BY e2e_ms DESC NULLS LAST, request_id
LIMIT $limit
