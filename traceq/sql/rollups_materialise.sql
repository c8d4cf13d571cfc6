-- Materialise the shared rollups of traceq/sql/rollups.sql once per `traceq diagnose` run
-- (traceq/playbooks/rollups.py). Each rollup is written as Parquet into a folder of the
-- session's private temp directory ($dir, which DuckDB already lets the session use for its
-- spill files), and a temporary view of the rollup's name over those files shadows the view
-- for every later query on the connection, the rollups below it included; the dataset itself
-- is never written. Files, not temporary tables: a table of per-request rows stays in memory
-- for the whole run (about 0.45 GB a million requests, docs/PERFORMANCE.md, "Diagnose peak
-- RSS"), a Parquet file costs memory only while a query reads it, and only the columns it
-- reads. Order matters: each reads the ones above it. gap_context (every chunk gap) is not
-- materialised: at a million requests it would be 56 M rows; playbooks read it for one
-- incident's time range, and gap_stalls for the rest. _request_gaps and _window_tbt are
-- written in parts, by time (rollups_time_parts.sql) or by request-id range
-- (rollups_request_gaps.sql), so that one pass never holds every chunk gap.
-- Uncompressed: the files live for one run, and snappy cost ~0.6 CPU-s of a 1 M-request
-- diagnose (writing and reading back; 127 MiB written against 171 uncompressed).
-- 1. The folder of this run's files.
SET VARIABLE traceq_rollups = $dir;
-- 2. Every file of one rollup in the folder, `NAME-PART.parquet` (traceq/playbooks/rollups.py
-- names them), parts in order: what each rollup's temporary view reads (rollups_store.sql).
CREATE OR REPLACE TEMP MACRO _rollup_files(name) AS TABLE
SELECT * FROM read_parquet(getvariable('traceq_rollups') || '/' || name || '-*.parquet');
-- 3. The rollups computed whole, one file each ($path, in the folder).
COPY (SELECT * FROM memory.main.diag_window) TO $path (FORMAT parquet, COMPRESSION uncompressed);
COPY (SELECT * FROM memory.main._request_engine) TO $path (FORMAT parquet, COMPRESSION uncompressed);
COPY (SELECT * FROM memory.main._prefill_timeline) TO $path (FORMAT parquet, COMPRESSION uncompressed);
COPY (SELECT * FROM memory.main.gap_stalls) TO $path (FORMAT parquet, COMPRESSION uncompressed);
COPY (SELECT * FROM memory.main.window_stats) TO $path (FORMAT parquet, COMPRESSION uncompressed);
