-- How many chunks start their request in each minute (traceq/layout.py cuts the `tokens`
-- sort into pieces of whole minutes from these counts): `minute` is the minute of `_t0` since
-- the epoch, floored (for a time before 1970 too, so that a minute never straddles midnight),
-- `day` its UTC date. The chunks of requests without any time (`_t0` NULL) are one row of
-- NULLs, last. One row a minute in which a request starts: at most 1,440 a day.
SELECT minute, strftime(make_timestamp(minute * 60000000), '%Y-%m-%d') AS day, chunks
FROM (
    SELECT
        _t0 // 60000000000 - CAST(_t0 % 60000000000 < 0 AS BIGINT) AS minute,
        count(*) AS chunks
    FROM _staged_tokens_t0
    GROUP BY minute
)
ORDER BY minute NULLS LAST
