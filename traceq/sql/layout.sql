-- How one source's rows are laid out in the dataset (traceq/layout.py): each table's rows
-- sorted for pruning, with `_day` (the UTC date of the table's time column) naming the
-- `day=` partition. Inputs: _staged_<table>, one view per partitioned table (empty when the
-- source has none), and _staged_tokens_t0 (layout_tokens_t0.sql). Outputs: _laid_<table>
-- (sorted rows plus _day) and _days_<table>.

CREATE OR REPLACE TEMP MACRO _utc_day(ns) AS strftime(make_timestamp(ns // 1000), '%Y-%m-%d');

-- requests in arrival order (request_pick.sql and the views read them in that order too)
CREATE OR REPLACE TEMP VIEW _laid_requests AS
SELECT *, _utc_day(t_arrival) AS _day
FROM _staged_requests
ORDER BY t_arrival NULLS LAST, request_id, view;

-- tokens: each request's chunks together and in order (the views join on request_id and
-- read a request's chunks by idx), requests ordered by their first chunk, so that a row
-- group spans a short stretch of time (its min/max ts prune a time filter). A request's
-- chunks stay together in the day of its first chunk.
-- gap_ns left null by a reader (OTLP) is filled here: the time since the previous chunk of
-- the same request, which in this order is the row before. `lag() OVER ()` (no partition, no
-- order of its own) streams over the sorted rows, one row back, so no window holds the
-- chunks; it is taken before a day's filter, and a day's first row is a request's first chunk.
-- _t0 (the request's first chunk) comes with each chunk from _staged_tokens_t0, written by
-- layout_tokens_t0.sql before this file runs, so the sort reads one file and joins nothing.
CREATE OR REPLACE TEMP VIEW _laid_tokens AS
WITH sorted AS (
    SELECT t.* EXCLUDE (_t0), _utc_day(t._t0) AS _day
    FROM _staged_tokens_t0 AS t
    ORDER BY t._t0 NULLS LAST, t.request_id, t.view, t.idx, t.ts
)
SELECT * REPLACE (
    coalesce(
        gap_ns,
        CASE
            WHEN idx > 0
                AND request_id IS NOT DISTINCT FROM lag(request_id) OVER ()
                AND view IS NOT DISTINCT FROM lag(view) OVER ()
                THEN ts - lag(ts) OVER ()
        END
    ) AS gap_ns
)
FROM sorted;

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
CREATE OR REPLACE TEMP VIEW _days_tokens AS
SELECT DISTINCT _utc_day(_t0) FROM _staged_tokens_t0 ORDER BY 1;
CREATE OR REPLACE TEMP VIEW _days_spans AS
SELECT DISTINCT _utc_day(t_start) FROM _staged_spans ORDER BY 1;
CREATE OR REPLACE TEMP VIEW _days_engine_stats AS
SELECT DISTINCT _utc_day(ts) FROM _staged_engine_stats ORDER BY 1;
CREATE OR REPLACE TEMP VIEW _days_events AS
SELECT DISTINCT _utc_day(ts) FROM _staged_events ORDER BY 1;
CREATE OR REPLACE TEMP VIEW _days_gpu_samples AS
SELECT DISTINCT _utc_day(ts) FROM _staged_gpu_samples ORDER BY 1;
