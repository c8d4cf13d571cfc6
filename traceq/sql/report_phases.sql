-- `traceq report`: the phase breakdown (request_phases), one row per phase: requests with the
-- phase known, mean, p50 and p95 (ms) and the phase's share of all e2e time (sum / sum e2e).
WITH p AS (
    SELECT 1 AS ord, 'tokenize' AS phase, tokenize_ns AS ns, e2e_ns FROM request_phases
    UNION ALL
    SELECT 2, 'queue', queue_ns, e2e_ns FROM request_phases
    UNION ALL
    SELECT 3, 'prefill', prefill_ns, e2e_ns FROM request_phases
    UNION ALL
    SELECT 4, 'decode', decode_ns, e2e_ns FROM request_phases
    UNION ALL
    SELECT 5, 'residual', residual_ns, e2e_ns FROM request_phases
)
SELECT
    phase,
    count(ns) AS n,
    avg(ns) / 1e6 AS mean_ms,
    quantile_cont(ns, 0.5) / 1e6 AS p50_ms,
    quantile_cont(ns, 0.95) / 1e6 AS p95_ms,
    sum(ns) / nullif((SELECT sum(e2e_ns) FROM request_phases), 0) AS share
FROM p
GROUP BY ord, phase
ORDER BY ord;
