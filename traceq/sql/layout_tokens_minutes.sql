-- How many chunks start their request in each minute (traceq/layout.py cuts the `tokens`
-- sort into pieces of whole minutes from these counts): `minute` is the minute of `_t0` since
-- the epoch, floored (for a time before 1970 too, so that a minute never straddles midnight),
-- `day` its UTC date (`_floor_div` and `_utc_day`: layout.sql, run before this file). The
-- chunks of requests without any time (`_t0` NULL) are one row of NULLs, last. One row a
-- minute in which a request starts: at most 1,440 a day. Read from _tokens_starts
-- (layout_tokens_starts.sql): one row a request.
SELECT minute, _utc_day(t0) AS day, chunks
FROM (
    SELECT
        _floor_div(_t0, 60000000000) AS minute,
        min(_t0) AS t0,
        CAST(sum(chunks) AS BIGINT) AS chunks
    FROM _tokens_starts
    GROUP BY minute
)
ORDER BY minute NULLS LAST
