-- Materialise the shared rollups of traceq/sql/rollups.sql once per `traceq diagnose` run
-- (traceq/playbooks/rollups.py). Each temporary table takes the name of its view and so
-- shadows it for every later query on the connection, the rollups below it included; the
-- dataset itself is never written. Order matters: each reads the ones above it. gap_context
-- (every chunk gap) is not materialised: at a million requests it would not fit the memory
-- limit; playbooks read it for one incident's time range, and gap_stalls for the rest.
-- _request_gaps and _window_tbt start empty here (LIMIT 0 runs nothing) and are filled in
-- parts, by time (rollups_time_parts.sql) or by request-id range (rollups_request_gaps.sql),
-- so that one pass never holds every chunk gap (traceq/playbooks/rollups.py).
CREATE OR REPLACE TEMP TABLE diag_window AS SELECT * FROM main.diag_window;
CREATE OR REPLACE TEMP TABLE _request_engine AS SELECT * FROM main._request_engine;
CREATE OR REPLACE TEMP TABLE _prefill_timeline AS SELECT * FROM main._prefill_timeline;
CREATE OR REPLACE TEMP TABLE _request_gaps AS SELECT * FROM main._request_gaps LIMIT 0;
CREATE OR REPLACE TEMP TABLE gap_stalls AS SELECT * FROM main.gap_stalls;
CREATE OR REPLACE TEMP TABLE request_tbt AS SELECT * FROM main.request_tbt;
CREATE OR REPLACE TEMP TABLE _window_tbt AS SELECT * FROM main._window_tbt LIMIT 0;
CREATE OR REPLACE TEMP TABLE window_stats AS SELECT * FROM main.window_stats;
