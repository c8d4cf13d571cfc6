-- The temporary views that shadow each rollup view once its files are written
-- (rollups_materialise.sql, traceq/playbooks/rollups.py): every file of the rollup in the
-- run's folder (_rollup_files). One statement per rollup, in the order of rollups.ROLLUPS.
CREATE OR REPLACE TEMP VIEW diag_window AS SELECT * FROM _rollup_files('diag_window');
CREATE OR REPLACE TEMP VIEW _request_engine AS SELECT * FROM _rollup_files('_request_engine');
CREATE OR REPLACE TEMP VIEW _prefill_timeline AS SELECT * FROM _rollup_files('_prefill_timeline');
CREATE OR REPLACE TEMP VIEW _request_gaps AS SELECT * FROM _rollup_files('_request_gaps');
CREATE OR REPLACE TEMP VIEW gap_stalls AS SELECT * FROM _rollup_files('gap_stalls');
CREATE OR REPLACE TEMP VIEW _window_tbt AS SELECT * FROM _rollup_files('_window_tbt');
CREATE OR REPLACE TEMP VIEW window_stats AS SELECT * FROM _rollup_files('window_stats');
