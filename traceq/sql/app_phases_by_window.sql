-- App phases: mean time per phase (ms) of the requests that arrived in each window of
-- $bucket_ns within [$since, $until). One row per window; the chart stacks the phases.
SELECT
    t_arrival // $bucket_ns * $bucket_ns AS ts,
    count(*) AS requests,
    avg(tokenize_ms) AS tokenize,
    avg(queue_ms) AS queue,
    avg(prefill_ms) AS prefill,
    avg(decode_ms) AS decode,
    avg(residual_ms) AS residual
FROM request_phases
WHERE t_arrival >= $since AND t_arrival < $until
GROUP BY 1
ORDER BY 1
