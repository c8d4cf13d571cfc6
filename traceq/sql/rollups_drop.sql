-- Undo a materialisation that failed part way (traceq/playbooks/rollups.py): every temporary
-- table and view it may have created, so that no half-filled table shadows its view.
-- _request_gaps is a table until request_tbt is made, a view after (rollups_slim.sql): the
-- statement for the other kind fails, and is passed over.
DROP VIEW IF EXISTS temp.main._request_gaps;
DROP TABLE IF EXISTS temp.main.diag_window;
DROP TABLE IF EXISTS temp.main._request_engine;
DROP TABLE IF EXISTS temp.main._prefill_timeline;
DROP TABLE IF EXISTS temp.main._request_gaps;
DROP TABLE IF EXISTS temp.main.gap_stalls;
DROP TABLE IF EXISTS temp.main.request_tbt;
DROP TABLE IF EXISTS temp.main._window_tbt;
DROP TABLE IF EXISTS temp.main.window_stats;
DROP TABLE IF EXISTS temp.main._request_span;
DROP VIEW IF EXISTS temp.main._request_chunks;
DROP VIEW IF EXISTS temp.main._window_chunks;
