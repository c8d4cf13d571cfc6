-- `traceq whatif` (traceq/whatif/workload.py): the workload to replay, one row per server
-- request that reached the engine, in arrival order (at most $limit, the first ones): arrival,
-- prompt, output and prefix-cached tokens, and whether the request was aborted (finish reason
-- `abort`: a client that disconnected) with its time from arrival to end. Requests that arrived
-- together keep the order in which they reached the engine's queue. Other failed requests are
-- left out: they never ran, or their lengths are not the ones the client asked for.
SELECT
    t_arrival,
    prompt_tokens AS prompt,
    coalesce(output_tokens, 0) AS output,
    least(coalesce(cached_tokens, 0), prompt_tokens - 1) AS cached,
    coalesce(finish_reason = 'abort', false) AS aborted,
    e2e_ns
FROM request_phases
WHERE view = 'server' AND prompt_tokens > 0
  AND ((error IS NULL AND output_tokens > 0) OR (finish_reason = 'abort' AND e2e_ns > 0))
ORDER BY
    t_arrival,
    coalesce(ttft_ns, e2e_ns) - coalesce(queue_ns, 0) - coalesce(prefill_ns, 0),
    request_id
LIMIT $limit
