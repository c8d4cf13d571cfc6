-- `traceq report`: the phase breakdown (request_phases), one row per phase: requests with the
-- phase known, mean, p50 and p95 (ms) and the phase's share of all e2e time (sum / sum e2e).
-- One ungrouped aggregate per phase, each with one quantile state (p50 and p95 from one list):
-- a quantile state holds every value of its column, so the five phases grouped in one
-- aggregate, each with two states, held ten copies of the requests' column at once.
WITH p AS (
    SELECT
        1 AS ord, 'tokenize' AS phase, count(tokenize_ns) AS n, avg(tokenize_ns) AS mean_ns,
        quantile_cont(tokenize_ns, [0.5, 0.95]) AS q, sum(tokenize_ns) AS total_ns
    FROM request_phases
    UNION ALL
    SELECT 2, 'queue', count(queue_ns), avg(queue_ns), quantile_cont(queue_ns, [0.5, 0.95]),
        sum(queue_ns)
    FROM request_phases
    UNION ALL
    SELECT 3, 'prefill', count(prefill_ns), avg(prefill_ns),
        quantile_cont(prefill_ns, [0.5, 0.95]), sum(prefill_ns)
    FROM request_phases
    UNION ALL
    SELECT 4, 'decode', count(decode_ns), avg(decode_ns), quantile_cont(decode_ns, [0.5, 0.95]),
        sum(decode_ns)
    FROM request_phases
    UNION ALL
    SELECT 5, 'residual', count(residual_ns), avg(residual_ns),
        quantile_cont(residual_ns, [0.5, 0.95]), sum(residual_ns)
    FROM request_phases
)
SELECT
    phase,
    n,
    mean_ns / 1e6 AS mean_ms,
    q[1] / 1e6 AS p50_ms,
    q[2] / 1e6 AS p95_ms,
    total_ns / nullif((SELECT sum(e2e_ns) FROM request_phases), 0) AS share
FROM p
ORDER BY ord;
