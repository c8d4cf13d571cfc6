-- Each staged chunk with `_t0`, its request's first chunk time, written to the scratch folder
-- $path in files of $files row groups (traceq/layout.py, T0_FILE_ROW_GROUPS) before the pieces
-- of layout_tokens_piece.sql sort by it. The request is keyed by a 64-bit hash of
-- (request_id, view), NULLs included as IS NOT DISTINCT FROM would: the aggregate and the
-- join then hold 16 bytes a request, not its id. Joined to the strings and sorted in one
-- pipeline, the 3 M requests of a 26 GB OTLP file ran out of the 512 MB LAYOUT_MEMORY ("failed
-- to pin block", both ways: the join's strings, and join and sort together). Two requests
-- whose keys collide (~1e-7 at 3 M requests) share the earlier first-chunk time: they sort
-- together and each stays whole (the sort goes on by request_id and view), so only where that
-- request sits in time changes, never its rows.
COPY (
    SELECT t.*, s._t0
    FROM _staged_tokens AS t
    LEFT JOIN (
        SELECT hash(request_id, view) AS k, min(ts) AS _t0 FROM _staged_tokens GROUP BY ALL
    ) AS s ON s.k = hash(t.request_id, t.view)
) TO $path (FORMAT parquet, COMPRESSION zstd, ROW_GROUPS_PER_FILE $files)
