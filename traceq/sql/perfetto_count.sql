-- `traceq export --format perfetto`: how many requests and chunks [$since, $until) holds
-- (the app exports a window only below its bound).
SELECT
    (SELECT count(*) FROM request_phases WHERE t_arrival >= $since AND t_arrival < $until)
        AS requests,
    (SELECT count(*) FROM tokens WHERE ts >= $since AND ts < $until) AS tokens
