-- `traceq whatif` (traceq/whatif/): what the dataset holds for a calibration, one row:
-- requests with a first token, those of them with a prompt length (the replay needs one),
-- the server's requests and those of them that failed (a run where all failed has no timing),
-- requests a client aborted, requests with per-token timing (server chunks), requests
-- prefilled and decoded by different instances (a disaggregated run: request_phases'
-- prefill_instance and decode_instance, from the stitch) and how many instances did each,
-- the engine's peaks from its stats lines (null without them), the instances, and the GPU's
-- memory and name (the defaults of vLLM depend on both).
SELECT
    timed.requests AS timed_requests,
    timed.sized AS sized_requests,
    timed.failed AS failed_requests,
    timed.served AS server_requests,
    (SELECT count(*) FROM request_phases WHERE view = 'server' AND finish_reason = 'abort'
        AND prompt_tokens > 0 AND e2e_ns > 0) AS aborted_requests,
    (SELECT count(DISTINCT request_id) FROM token_gaps WHERE view = 'server'
        AND tbt_ns IS NOT NULL) AS chunked_requests,
    (SELECT count(DISTINCT instance) FROM request_phases WHERE view = 'server') AS instances,
    split.requests AS split_requests,
    split.prefill_instances,
    split.decode_instances,
    (SELECT max(running) FROM engine_stats) AS max_running,
    (SELECT max(waiting) FROM engine_stats) AS max_waiting,
    (SELECT max(kv_usage) FROM engine_stats) AS max_kv_usage,
    (SELECT max(fb_total_mib) FROM gpu_samples) AS gpu_mib,
    (SELECT any_value(model_name) FROM gpu_samples) AS gpu_name,
    (SELECT count(DISTINCT coalesce(uuid, host || ':' || gpu)) FROM gpu_samples) AS gpus,
    (SELECT max(prompt_tokens - coalesce(cached_tokens, 0)) FROM request_phases
        WHERE view = 'server' AND error IS NULL) AS max_uncached_prompt
FROM (
    SELECT
        count(*) FILTER (WHERE error IS NULL AND ttft_ns IS NOT NULL AND prefill_ns IS NOT NULL)
            AS requests,
        count(*) FILTER (WHERE error IS NULL AND ttft_ns IS NOT NULL AND prefill_ns IS NOT NULL
                         AND prompt_tokens > 0) AS sized,
        count(*) FILTER (WHERE error IS NOT NULL) AS failed,
        count(*) AS served
    FROM request_phases
    WHERE view = 'server'
) AS timed, (
    -- requests the stitch found prefilled on one instance and decoded on another
    SELECT
        count(*) AS requests,
        count(DISTINCT prefill_instance) AS prefill_instances,
        count(DISTINCT decode_instance) AS decode_instances
    FROM request_phases
    WHERE view = 'server' AND prefill_instance <> '' AND decode_instance <> ''
        AND prefill_instance <> decode_instance
) AS split
