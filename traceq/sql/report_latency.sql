-- `traceq report`: the percentiles of one request latency, $metric (ttft_ms, tpot_ms or e2e_ms
-- of request_phases), linear (quantile_cont). traceq/report/measure.py runs it once per metric:
-- a quantile state holds every value of its column, so one at a time holds one column of the
-- requests, not three.
SELECT
    quantile_cont(
        CASE $metric
            WHEN 'ttft_ms' THEN ttft_ms
            WHEN 'tpot_ms' THEN tpot_ms
            WHEN 'e2e_ms' THEN e2e_ms
        END,
        [0.5, 0.9, 0.95, 0.99]
    ) AS q
FROM request_phases;
