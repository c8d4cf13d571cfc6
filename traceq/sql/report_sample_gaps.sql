-- `traceq report`: a bounded, deterministic sample of chunk gaps (token_gaps, at most $cap,
-- picked by a hash of request id, chunk index and $seed) for the TBT comparison, in time order.
-- Only gaps whose hash is at most $max_hash are sorted: the caller sets it so that a little
-- more than $cap gaps pass (traceq/report/sample.py), and the sample is the same as from all
-- gaps, in memory that does not grow with the gaps (DuckDB sorts a whole 5 M-gap input when
-- it does not pick its top-N operator).
WITH picked AS (
    SELECT ts, tbt_ms, hash(request_id, idx, $seed) AS h, request_id, idx
    FROM token_gaps
    WHERE tbt_ms IS NOT NULL AND hash(request_id, idx, $seed) <= $max_hash
    ORDER BY h, request_id, idx
    LIMIT $cap
)
SELECT tbt_ms FROM picked ORDER BY ts, h, request_id, idx;
