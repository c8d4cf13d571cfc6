-- How one source's rows are laid out in the dataset (traceq/layout.py): each table's rows
-- sorted for pruning, with `_day` (the UTC date of the table's time column) naming the
-- `day=` partition. Inputs: _staged_<table>, one view per partitioned table (empty when the
-- source has none). Outputs: _laid_<table> (sorted rows plus _day) and _days_<table>, for every
-- table but `tokens`, which is sorted in pieces (layout_tokens_minutes.sql,
-- layout_tokens_piece.sql).

-- a // b floored, where DuckDB's `//` truncates toward zero (b > 0; never overflows)
CREATE OR REPLACE TEMP MACRO _floor_div(a, b) AS a // b - CAST(a % b < 0 AS BIGINT);
-- the UTC date of a time in ns, floored (a time before 1970 too); also layout_tokens_minutes.sql
CREATE OR REPLACE TEMP MACRO _utc_day(ns) AS
    strftime(make_timestamp(_floor_div(ns, 1000)), '%Y-%m-%d');

-- requests in arrival order (request_pick.sql and the views read them in that order too)
CREATE OR REPLACE TEMP VIEW _laid_requests AS
SELECT *, _utc_day(t_arrival) AS _day
FROM _staged_requests
ORDER BY t_arrival NULLS LAST, request_id, view;

CREATE OR REPLACE TEMP VIEW _laid_spans AS
SELECT *, _utc_day(t_start) AS _day FROM _staged_spans
ORDER BY t_start NULLS LAST, trace_id, span_id;

CREATE OR REPLACE TEMP VIEW _laid_engine_stats AS
SELECT *, _utc_day(ts) AS _day FROM _staged_engine_stats
ORDER BY ts NULLS LAST, instance, engine;

CREATE OR REPLACE TEMP VIEW _laid_events AS
SELECT *, _utc_day(ts) AS _day FROM _staged_events
ORDER BY ts NULLS LAST, line;

CREATE OR REPLACE TEMP VIEW _laid_gpu_samples AS
SELECT *, _utc_day(ts) AS _day FROM _staged_gpu_samples
ORDER BY ts NULLS LAST, host, gpu;

CREATE OR REPLACE TEMP VIEW _days_requests AS
SELECT DISTINCT _utc_day(t_arrival) FROM _staged_requests ORDER BY 1;
CREATE OR REPLACE TEMP VIEW _days_spans AS
SELECT DISTINCT _utc_day(t_start) FROM _staged_spans ORDER BY 1;
CREATE OR REPLACE TEMP VIEW _days_engine_stats AS
SELECT DISTINCT _utc_day(ts) FROM _staged_engine_stats ORDER BY 1;
CREATE OR REPLACE TEMP VIEW _days_events AS
SELECT DISTINCT _utc_day(ts) FROM _staged_events ORDER BY 1;
CREATE OR REPLACE TEMP VIEW _days_gpu_samples AS
SELECT DISTINCT _utc_day(ts) FROM _staged_gpu_samples ORDER BY 1;
