-- `traceq whatif` (traceq/whatif/workload.py): the workload to replay, one row per successful
-- server request in arrival order (at most $limit, the first ones): arrival, prompt, output
-- and prefix-cached tokens. Requests that arrived together keep the order in which they
-- reached the engine's queue. Failed requests are left out: their lengths are not the ones the
-- client asked for.
SELECT
    t_arrival,
    prompt_tokens AS prompt,
    output_tokens AS output,
    least(coalesce(cached_tokens, 0), prompt_tokens - 1) AS cached
FROM request_phases
WHERE view = 'server' AND error IS NULL AND prompt_tokens > 0 AND output_tokens > 0
ORDER BY t_arrival, ttft_ns - coalesce(queue_ns, 0) - coalesce(prefill_ns, 0), request_id
LIMIT $limit
