-- `traceq export --format perfetto`: how many requests arrived in [$since, $until) (the app
-- exports a window only below its bound).
SELECT count(*) AS requests
FROM request_phases
WHERE t_arrival >= $since AND t_arrival < $until
