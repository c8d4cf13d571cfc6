-- Coarse requests from vLLM request-logging lines (second pass of traceq.ingest.serverlog).
-- Input: the scratch view log_lifecycle (request_id, what, ts, instance, prompt_tokens,
-- max_tokens), one row per Received / Added / Finished / Aborted line.
-- A request gets a row only when it has a Received line and a Finished or Aborted line.
-- Log stamps have one-second resolution: time_resolution_ns says so.
SELECT
    request_id,
    'server' AS view,
    any_value(instance) AS instance,
    min(ts) FILTER (WHERE what = 'received') AS t_arrival,
    min(ts) FILTER (WHERE what = 'added') AS t_queued,
    coalesce(
        max(ts) FILTER (WHERE what = 'finished'), max(ts) FILTER (WHERE what = 'aborted')
    ) AS t_last_token,
    max(prompt_tokens) AS prompt_tokens,
    max(max_tokens) AS max_tokens,
    CASE
        WHEN bool_or(what = 'finished') THEN NULL
        ELSE 'abort'
    END AS finish_reason,
    CASE
        WHEN bool_or(what = 'finished') THEN NULL
        ELSE 'aborted'
    END AS error,
    CAST(1000000000 AS BIGINT) AS time_resolution_ns
FROM log_lifecycle
GROUP BY request_id
HAVING
    bool_or(what = 'received')
    AND (bool_or(what = 'finished') OR bool_or(what = 'aborted'))
ORDER BY t_arrival, request_id
