-- The parts of the per-request _request_gaps pass (traceq/playbooks/rollups.py).
-- 1. The number of requests.
SELECT count(*) AS requests FROM requests;
-- 2. Whether tokens are stored in request-id order, judged on the first 100 k chunks
-- (descents: a chunk whose request id sorts before the previous one's). Parts by id range
-- then read only their own row groups; where tokens are in time order (the day-partitioned
-- layout, traceq/layout.py) every part would read every row group, so there is one pass.
SELECT count(*) FILTER (WHERE request_id < prev) AS descents
FROM (
    SELECT request_id, lag(request_id) OVER () AS prev
    FROM (SELECT request_id FROM tokens LIMIT 100000)
);
-- 3. Request-id bounds that cut the requests into parts of about equal size: quantiles
-- ($quantiles) of a fixed sample of ids, so the same dataset gives the same bounds. Any
-- bounds give the same rows (rollups_request_gaps.sql); the sample only evens out the parts.
SELECT quantile_disc(request_id, $quantiles) AS bounds
FROM (SELECT request_id FROM requests USING SAMPLE reservoir(10000 ROWS) REPEATABLE (1));
-- 4. The chunks of the sources without rollups, whose per-request rows are computed
-- (rollups.sql, _request_chunks; traceq/db.py, token_views): none, and there is no pass.
SELECT
    (SELECT count(*) FROM _tokens_primary_all_unrolled)
    + (SELECT count(*) FROM _tokens_primary_some_unrolled)
    + (SELECT count(*) FROM _tokens_client_all_unrolled)
    + (SELECT count(*) FROM _tokens_client_some_unrolled) AS chunks;
