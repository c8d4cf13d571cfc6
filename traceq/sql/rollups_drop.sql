-- Undo a materialisation that failed part way (traceq/playbooks/rollups.py): every temporary
-- view it may have created and the macro over its files, so that no rollup with missing parts
-- shadows its view (the files themselves are removed by the caller).
DROP VIEW IF EXISTS temp.main.diag_window;
DROP VIEW IF EXISTS temp.main._request_engine;
DROP VIEW IF EXISTS temp.main._prefill_timeline;
DROP VIEW IF EXISTS temp.main._request_gaps;
DROP VIEW IF EXISTS temp.main.gap_stalls;
DROP VIEW IF EXISTS temp.main._window_tbt;
DROP VIEW IF EXISTS temp.main.window_stats;
DROP VIEW IF EXISTS temp.main._request_span;
DROP VIEW IF EXISTS temp.main._request_chunks;
DROP VIEW IF EXISTS temp.main._window_chunks;
DROP MACRO TABLE IF EXISTS temp.main._rollup_files;
