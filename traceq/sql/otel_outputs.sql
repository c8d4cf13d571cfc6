-- Second pass of the OpenTelemetry ingest, part 6: the otel_* views, each written to the table
-- of that name (traceq/ingest/otel/__init__.py). A request span of a stitched trace
-- (otel_stitched.sql) is replaced by its trace's one request; every other one is written as
-- its engine saw it.

-- Each request span's id, view, and whether (and moved by how much, ns) its tokens are kept.
CREATE OR REPLACE TEMP TABLE _req_out AS
SELECT
    r._span,
    coalesce(f.request_id, r.request_id) AS request_id,
    r.view,
    coalesce(f.shift_ns, 0) AS shift_ns,
    coalesce(f.keep, true) AS keep
FROM _req AS r
LEFT JOIN _req_fix AS f USING (_span);

CREATE OR REPLACE TEMP VIEW otel_requests AS
SELECT r.* EXCLUDE (_span)
FROM _engine_requests AS r
ANTI JOIN _req_fix AS f USING (_span)
UNION ALL BY NAME
SELECT * FROM _stitched;

-- gap_ns (TBT, the time since the previous chunk of the same request) is left null: the
-- dataset fills it while it writes the tokens sorted by request and idx (traceq/layout.py),
-- so no window over every chunk runs here; token_gaps is a projection (views.sql).
CREATE OR REPLACE TEMP VIEW otel_tokens AS
WITH chunks AS (
    SELECT
        r.request_id,
        r.view,
        t.idx,
        t.ts - r.shift_ns AS ts,
        t.n_tokens,
        t.t_scheduled - r.shift_ns AS t_scheduled,
        t.batch_size,
        t.waiting,
        t.total_tokens,
        t.time_base
    FROM stage_tokens AS t
    JOIN _req_out AS r USING (_span)
    WHERE r.keep
    UNION ALL
    SELECT r.request_id, r.view, t.idx, t.ts, 1, t.t_scheduled, NULL, NULL, NULL, 'epoch'
    FROM _step_tokens AS t
    JOIN _req_out AS r USING (_span)
    WHERE r.keep
)
SELECT *, NULL::BIGINT AS gap_ns FROM chunks;

CREATE OR REPLACE TEMP VIEW otel_spans AS
SELECT
    k.trace_id,
    k.span_id,
    k.parent_id,
    k.name,
    k.kind,
    k.service,
    k.t_start,
    k.t_end,
    k.status_code,
    k.attributes_json AS attributes,
    o.request_id
FROM _kept AS k
JOIN _span_req AS o USING (_span);

CREATE OR REPLACE TEMP VIEW otel_events AS
SELECT
    e.ts,
    o.instance,
    e.kind,
    'INFO' AS severity,
    o.request_id,
    e.value,
    e.message
FROM stage_events AS e
JOIN _span_req AS o USING (_span);

CREATE OR REPLACE TEMP VIEW otel_request_hops AS
SELECT
    t.request_id,
    h.trace_id,
    h.hop,
    h.instance,
    h.t_start,
    h.t_end,
    (h.t_end - h.t_start) / 1e6 AS dur_ms,
    h.name,
    h.span_id,
    h.hop_request_id,
    h.served,
    nullif(h.detail, '') AS detail,
    h.worker,
    h.overlap_blocks
FROM _hops AS h
JOIN _trace_req AS t USING (trace_id);

CREATE OR REPLACE TEMP VIEW otel_clock_offsets AS
SELECT
    c.instance,
    c.offset_ns / 1e6 AS offset_ms,
    c.bound_ns / 1e6 AS bound_ms,
    c.lo_ns / 1e6 AS lo_ms,
    c.hi_ns / 1e6 AS hi_ms,
    c.reference,
    c.constraints,
    u.corrects_ms
FROM _clock AS c
LEFT JOIN _clock_use AS u USING (instance);

CREATE OR REPLACE TEMP VIEW otel_unserved AS
SELECT trace_id, request_id, nullif(ids, '') AS ids, hop, instance, error, ts FROM _unserved;
