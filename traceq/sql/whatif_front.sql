-- `traceq whatif` (traceq/whatif/calibrate.py): the time from arrival to the engine's queue
-- (tokenization and the hand-off to the engine: TTFT minus queue and prefill) as a line in the
-- prompt length, one row: intercept (ns), slope (ns per prompt token) and the median, over
-- the successful server requests that found the front idle (the request before them on their
-- instance had reached the queue when they arrived), so a burst's wait for the tokenizer is
-- not taken for its cost: the replay queues requests on its own tokenizer. Of requests that
-- arrived together, the one that reached the queue first was served first. The slope of the
-- line through the origin is the fit when the intercept comes out negative (a tokenizer whose
-- cost is all per token, measured with noise).
WITH f AS (
    SELECT
        t_arrival,
        instance,
        ttft_ns - coalesce(queue_ns, 0) - prefill_ns AS front_ns,
        prompt_tokens
    FROM request_phases
    WHERE view = 'server' AND error IS NULL AND ttft_ns IS NOT NULL AND prefill_ns IS NOT NULL
      AND prompt_tokens > 0
),
idle AS (
    SELECT
        *,
        coalesce(
            max(t_arrival + front_ns) OVER (
                PARTITION BY instance ORDER BY t_arrival, front_ns
                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
            ) <= t_arrival,
            true
        ) AS front_idle
    FROM f
    WHERE front_ns >= 0
)
SELECT
    regr_intercept(front_ns, prompt_tokens) AS base_ns,
    regr_slope(front_ns, prompt_tokens) AS per_token_ns,
    sum(prompt_tokens::DOUBLE * front_ns) / sum(prompt_tokens::DOUBLE * prompt_tokens)
        AS origin_per_token_ns,
    median(front_ns) AS median_ns,
    count(*) AS n
FROM idle
WHERE front_idle
