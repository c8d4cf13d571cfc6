-- The temporary views that shadow each rollup view once its files are written
-- (rollups_materialise.sql, traceq/playbooks/rollups.py): every file of the rollup in the
-- run's folder, `NAME-PART.parquet`, parts in order. One statement per rollup, in the order of
-- rollups.ROLLUPS.
CREATE OR REPLACE TEMP VIEW diag_window AS
SELECT * FROM read_parquet(getvariable('traceq_rollups') || '/diag_window-*.parquet');
CREATE OR REPLACE TEMP VIEW _request_engine AS
SELECT * FROM read_parquet(getvariable('traceq_rollups') || '/_request_engine-*.parquet');
CREATE OR REPLACE TEMP VIEW _prefill_timeline AS
SELECT * FROM read_parquet(getvariable('traceq_rollups') || '/_prefill_timeline-*.parquet');
CREATE OR REPLACE TEMP VIEW _request_gaps AS
SELECT * FROM read_parquet(getvariable('traceq_rollups') || '/_request_gaps-*.parquet');
CREATE OR REPLACE TEMP VIEW gap_stalls AS
SELECT * FROM read_parquet(getvariable('traceq_rollups') || '/gap_stalls-*.parquet');
CREATE OR REPLACE TEMP VIEW _window_tbt AS
SELECT * FROM read_parquet(getvariable('traceq_rollups') || '/_window_tbt-*.parquet');
CREATE OR REPLACE TEMP VIEW window_stats AS
SELECT * FROM read_parquet(getvariable('traceq_rollups') || '/window_stats-*.parquet');
