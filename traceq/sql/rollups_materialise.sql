-- Materialise the shared rollups of traceq/sql/rollups.sql once per `traceq diagnose` run
-- (traceq/playbooks/rollups.py). Each temporary table takes the name of its view and so
-- shadows it for every later query on the connection, the rollups below it included; the
-- dataset itself is never written. Order matters: each reads the ones above it.
CREATE OR REPLACE TEMP TABLE diag_window AS SELECT * FROM main.diag_window;
CREATE OR REPLACE TEMP TABLE request_tbt AS SELECT * FROM main.request_tbt;
CREATE OR REPLACE TEMP TABLE gap_context AS SELECT * FROM main.gap_context;
CREATE OR REPLACE TEMP TABLE window_stats AS SELECT * FROM main.window_stats;
