-- The time parts of the two grouped passes over every chunk gap, _request_gaps (per request)
-- and _window_tbt (per window), where tokens are stored in time order (the day-partitioned
-- layout, traceq/layout.py: each request's chunks together, requests by their first chunk).
-- A part's chunks are picked by a `ts` range, which reaches the Parquet scan as a constant
-- (getvariable() is folded when a query is bound), so each part reads only the row groups of
-- its stretch of time. Driven by traceq/playbooks/rollups.py; DuckDB only (Spark computes
-- the views whole).
-- 1. Chunks without a time: a `ts` range would leave them out of their request, so their
-- presence keeps the per-request pass whole.
SELECT count(*) AS untimed FROM tokens WHERE ts IS NULL;
-- 2. Each request's first and last chunk time, over every source and view (chunk_gaps reads
-- its rows from tokens): a request belongs to the part that holds its first chunk. A file in
-- the run's folder (rollups_materialise.sql), not a table held in memory through the parts.
COPY (
    SELECT request_id, min(ts) AS t0, max(ts) AS t1
    FROM tokens
    WHERE request_id IS NOT NULL
    GROUP BY request_id
) TO $path (FORMAT parquet, COMPRESSION uncompressed);
CREATE OR REPLACE TEMP VIEW _request_span AS SELECT * FROM _rollup_files('_request_span');
-- 3. First-chunk times that cut the requests into parts of equal size ($quantiles), and the
-- whole range.
SELECT quantile_disc(t0, $quantiles) AS bounds, min(t0) AS t_min, max(t0) AS t_max
FROM _request_span;
-- 4. One part: the requests whose first chunk is in [$lo, $hi), and the time range of all their
-- chunks (from the first chunk of the first to the last chunk of any).
SET VARIABLE traceq_part_t0_lo = $lo;
SET VARIABLE traceq_part_t0_hi = $hi;
SET VARIABLE traceq_part_ts_lo = (
    SELECT min(t0) FROM _request_span
    WHERE t0 >= getvariable('traceq_part_t0_lo') AND t0 < getvariable('traceq_part_t0_hi')
);
SET VARIABLE traceq_part_ts_hi = (
    SELECT max(t1) FROM _request_span
    WHERE t0 >= getvariable('traceq_part_t0_lo') AND t0 < getvariable('traceq_part_t0_hi')
);
-- 5. The part's chunk gaps, in place of every chunk gap of the sources without rollups
-- (traceq/sql/rollups.sql, _request_chunks): a temporary view shadows the view of the same
-- name for _request_gaps_computed.
CREATE OR REPLACE TEMP VIEW _request_chunks AS
SELECT c.*
FROM memory.main._request_chunks AS c
SEMI JOIN _request_span AS s
    ON s.request_id = c.request_id
    AND s.t0 >= getvariable('traceq_part_t0_lo')
    AND s.t0 < getvariable('traceq_part_t0_hi')
WHERE c.ts BETWEEN getvariable('traceq_part_ts_lo') AND getvariable('traceq_part_ts_hi');
-- 6. The part's rows, to the part's file (requests with an id; those without one are a part of
-- their own, rollups_request_gaps.sql).
COPY (
    SELECT * FROM memory.main._request_gaps_computed WHERE request_id IS NOT NULL
) TO $path (FORMAT parquet, COMPRESSION uncompressed);
-- 7. Every chunk gap again.
DROP VIEW IF EXISTS temp.main._request_chunks;
DROP VIEW IF EXISTS temp.main._request_span;
-- 8. The chunk count, which sets the number of window parts, and the window grid.
SELECT
    (SELECT count(*) FROM tokens) AS chunks,
    grid_start,
    window_ns,
    (t_end - grid_start) // window_ns + 1 AS windows
FROM diag_window;
-- 9. One window part: the chunk gaps with ts in [$lo, $hi), bounds on the window grid, so the
-- part's windows are whole.
SET VARIABLE traceq_window_lo = $lo;
SET VARIABLE traceq_window_hi = $hi;
CREATE OR REPLACE TEMP VIEW _window_chunks AS
SELECT *
FROM memory.main.chunk_gaps
WHERE ts >= getvariable('traceq_window_lo') AND ts < getvariable('traceq_window_hi');
COPY (SELECT * FROM memory.main._window_tbt) TO $path (FORMAT parquet, COMPRESSION uncompressed);
DROP VIEW IF EXISTS temp.main._window_chunks;
