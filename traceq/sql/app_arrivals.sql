-- App overview: arrivals and TTFT percentiles per window of $bucket_ns in [$since, $until)
-- (the request half of app_timeline_requests.sql, without its scan of every token gap).
SELECT
    t_arrival // $bucket_ns * $bucket_ns AS ts,
    count(*) AS requests,
    count(error) AS errors,
    count(*) / ($bucket_ns / 1e9) AS requests_per_s,
    quantile_cont(ttft_ms, 0.5) AS ttft_p50_ms,
    quantile_cont(ttft_ms, 0.99) AS ttft_p99_ms
FROM request_phases
WHERE t_arrival >= $since AND t_arrival < $until
GROUP BY 1
ORDER BY 1
