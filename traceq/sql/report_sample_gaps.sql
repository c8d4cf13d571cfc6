-- `traceq report`: a bounded, deterministic sample of chunk gaps (token_gaps, at most $cap,
-- picked by a hash of request id, chunk index and $seed) for the TBT comparison, in time order.
WITH picked AS (
    SELECT ts, tbt_ms
    FROM token_gaps
    WHERE tbt_ms IS NOT NULL
    ORDER BY hash(request_id, idx, $seed), request_id, idx
    LIMIT $cap
)
SELECT tbt_ms FROM picked ORDER BY ts;
