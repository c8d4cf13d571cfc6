-- The parts of the per-request _request_gaps pass (traceq/playbooks/rollups.py): first the
-- number of requests, then request-id bounds that cut them into parts of about equal size,
-- quantiles ($quantiles) of a fixed sample of ids, so the same dataset gives the same bounds.
-- Any bounds give the same rows (rollups_request_gaps.sql); the sample only evens out the
-- parts' memory.
SELECT count(*) AS requests FROM requests;
SELECT quantile_disc(request_id, $quantiles) AS bounds
FROM (SELECT request_id FROM requests USING SAMPLE reservoir(10000 ROWS) REPEATABLE (1));
