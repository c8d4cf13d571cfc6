-- `traceq report`: one row of the phase breakdown (request_phases) for the phase $phase
-- (tokenize, queue, prefill, decode or residual): requests with the phase known, mean, p50 and
-- p95 (ms) and the phase's share of all e2e time (sum / sum e2e). traceq/report/measure.py runs
-- it once per phase: a quantile state holds every value of its column, so one phase at a time,
-- with p50 and p95 from one state, holds one column of the requests (five phases grouped in one
-- aggregate, with a state per percentile, held ten).
WITH p AS (
    SELECT
        CASE $phase
            WHEN 'tokenize' THEN tokenize_ns
            WHEN 'queue' THEN queue_ns
            WHEN 'prefill' THEN prefill_ns
            WHEN 'decode' THEN decode_ns
            WHEN 'residual' THEN residual_ns
        END AS ns,
        e2e_ns
    FROM request_phases
),
s AS (
    SELECT
        count(ns) AS n,
        avg(ns) AS mean_ns,
        quantile_cont(ns, [0.5, 0.95]) AS q,
        sum(ns) / nullif(sum(e2e_ns), 0) AS share
    FROM p
)
SELECT
    CAST($phase AS VARCHAR) AS phase,
    n,
    mean_ns / 1e6 AS mean_ms,
    q[1] / 1e6 AS p50_ms,
    q[2] / 1e6 AS p95_ms,
    share
FROM s;
