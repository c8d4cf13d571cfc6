-- Coarse requests from vLLM request-logging lines (second pass of traceq.ingest.serverlog).
-- Input: the scratch view log_lifecycle (request_id, what, ts, instance, prompt_tokens,
-- max_tokens), one row per Received / Added / Finished / Aborted line, and log_model (ts,
-- model), one row per engine config line.
-- A request gets a row only when it has a Received line and a Finished or Aborted line; its
-- model is the one of the last engine config logged before it arrived.
-- Log stamps have one-second resolution: time_resolution_ns says so.
WITH lifecycle AS (
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
        CASE WHEN NOT bool_or(what = 'finished') THEN 'abort' END AS finish_reason,
        CASE WHEN NOT bool_or(what = 'finished') THEN 'aborted' END AS error,
        CAST(1000000000 AS BIGINT) AS time_resolution_ns
    FROM log_lifecycle
    GROUP BY request_id
    HAVING
        bool_or(what = 'received')
        AND (bool_or(what = 'finished') OR bool_or(what = 'aborted'))
),

models AS (
    SELECT
        ts,
        any_value(model) AS model
    FROM log_model
    GROUP BY ts
)

SELECT
    lifecycle.*,
    models.model
FROM lifecycle
ASOF LEFT JOIN models ON lifecycle.t_arrival >= models.ts
ORDER BY lifecycle.t_arrival, lifecycle.request_id
