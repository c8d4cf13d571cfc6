-- One piece of the `tokens` sort (traceq/layout.py): the chunks whose request's first chunk
-- `_t0` lies in [$lo, $hi] (ns, both ends in), or, with $lo NULL, the chunks of requests
-- without any time.
-- Each request's chunks together and in order (the views join on request_id and read a
-- request's chunks by idx), requests ordered by their first chunk, so that a row group spans a
-- short stretch of time (its min/max ts prune a time filter). Pieces are whole minutes of one
-- UTC day, so a request's chunks stay together, in the day of its first chunk, and the pieces
-- of a day written one after the other are that day sorted.
-- gap_ns left null by a reader (OTLP) is filled here: the time since the previous chunk of
-- the same request, which in this order is the row before. `lag() OVER ()` (no partition, no
-- order of its own) streams over the sorted rows, one row back, so no window holds the
-- chunks; a piece's first row is a request's first chunk.
-- _t0 comes with each chunk from _staged_tokens_t0, written by layout_tokens_t0.sql, so the
-- sort reads one file and joins nothing; the range on _t0 prunes that file's row groups.
WITH sorted AS (
    SELECT t.* EXCLUDE (_t0)
    FROM _staged_tokens_t0 AS t
    WHERE (t._t0 >= $lo AND t._t0 <= $hi) OR ($lo IS NULL AND t._t0 IS NULL)
    ORDER BY t._t0, t.request_id, t.view, t.idx, t.ts
)
SELECT * REPLACE (
    coalesce(
        gap_ns,
        CASE
            WHEN idx > 0
                AND request_id IS NOT DISTINCT FROM lag(request_id) OVER ()
                AND view IS NOT DISTINCT FROM lag(view) OVER ()
                THEN ts - lag(ts) OVER ()
        END
    ) AS gap_ns
)
FROM sorted
