-- App phases: mean time per phase (ms) by length bucket of the requests that arrived in
-- [$since, $until). Buckets are powers of two of the prompt tokens ($by = 'prompt') or of the
-- output tokens ($by = 'output'): bucket b holds lengths in [2^b, 2^(b+1)); 0 tokens is b = 0.
WITH bucketed AS (
    SELECT
        *,
        CAST(floor(log2(greatest(
            CASE WHEN $by = 'output' THEN output_tokens ELSE prompt_tokens END, 1
        ))) AS INTEGER) AS b
    FROM request_phases
    WHERE t_arrival >= $since AND t_arrival < $until
        AND (CASE WHEN $by = 'output' THEN output_tokens ELSE prompt_tokens END) IS NOT NULL
)
SELECT
    b AS bucket,
    CAST(pow(2, b) AS BIGINT) || '–' || CAST(pow(2, b + 1) - 1 AS BIGINT) AS length,
    count(*) AS requests,
    avg(tokenize_ms) AS tokenize,
    avg(queue_ms) AS queue,
    avg(prefill_ms) AS prefill,
    avg(decode_ms) AS decode,
    avg(residual_ms) AS residual
FROM bucketed
GROUP BY b
ORDER BY b
