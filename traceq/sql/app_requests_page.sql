-- App requests table: one page of request_phases for the requests that arrived in
-- [$since, $until), filtered ($id_like: substring of the id, '' for any; $min_e2e_ms;
-- $errors_only) and sorted server-side by $sort (one of the numeric columns named below, or
-- 'arrival'), descending when $descending; $limit rows from $offset.
WITH filtered AS (
    SELECT
        *,
        CASE $sort
            WHEN 'e2e_ms' THEN e2e_ms
            WHEN 'ttft_ms' THEN ttft_ms
            WHEN 'tpot_ms' THEN tpot_ms
            WHEN 'queue_ms' THEN queue_ms
            WHEN 'prefill_ms' THEN prefill_ms
            WHEN 'decode_ms' THEN decode_ms
            WHEN 'prompt_tokens' THEN prompt_tokens
            WHEN 'output_tokens' THEN output_tokens
            ELSE t_arrival
        END AS sort_key
    FROM request_phases
    WHERE t_arrival >= $since AND t_arrival < $until
        AND ($id_like = '' OR contains(request_id, $id_like))
        AND coalesce(e2e_ms, 0) >= $min_e2e_ms
        AND (NOT $errors_only OR error IS NOT NULL)
)
SELECT
    request_id,
    make_timestamp_ns(t_arrival) AS arrival,
    e2e_ms,
    ttft_ms,
    tpot_ms,
    tokenize_ms,
    queue_ms,
    prefill_ms,
    decode_ms,
    prompt_tokens,
    output_tokens,
    finish_reason,
    error,
    instance
FROM filtered
ORDER BY
    CASE WHEN $descending THEN sort_key END DESC NULLS LAST,
    CASE WHEN NOT $descending THEN sort_key END ASC NULLS LAST,
    request_id
LIMIT $limit OFFSET $offset
