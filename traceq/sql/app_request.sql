-- App waterfall: one request's phases (request_phases row) by id, with its stamps relative to
-- arrival in ms, so the chart needs no arithmetic.
SELECT
    request_id,
    view,
    instance,
    model,
    t_arrival,
    prompt_tokens,
    output_tokens,
    cached_tokens,
    finish_reason,
    error,
    tokenize_ms,
    queue_ms,
    prefill_ms,
    decode_ms,
    residual_ms,
    ttft_ms,
    tpot_ms,
    e2e_ms
FROM request_phases
WHERE request_id = $request_id
