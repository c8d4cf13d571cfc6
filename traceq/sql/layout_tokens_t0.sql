-- Each staged chunk with `_t0`, its request's first chunk time (_tokens_starts,
-- layout_tokens_starts.sql), written to the scratch folder $path in files of $files row groups
-- (traceq/layout.py, T0_FILE_ROW_GROUPS) before the pieces of layout_tokens_piece.sql sort by
-- it, each reading only the row groups of its own time. Joined to the strings and sorted in
-- one pipeline, the 3 M requests of a 26 GB OTLP file ran out of the 512 MB LAYOUT_MEMORY
-- ("failed to pin block", both ways: the join's strings, and join and sort together); a small
-- source joins in place instead (layout_tokens_t0_view.sql).
COPY (
    SELECT t.*, s._t0
    FROM _staged_tokens AS t
    LEFT JOIN _tokens_starts AS s ON s.k = hash(t.request_id, t.view)
) TO $path (FORMAT parquet, COMPRESSION zstd, ROW_GROUPS_PER_FILE $files)
