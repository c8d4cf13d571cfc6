-- Second pass of the OpenTelemetry ingest, part 1 of 4, over one source's staged rows
-- (traceq/ingest/otel/__init__.py runs otel_finalize, otel_stamps, otel_stitch with
-- otel_clocks, otel_outputs). Inputs (views the ingester creates over its scratch Parquet):
-- stage_spans, stage_tokens, stage_events. Here: duplicate spans, the traces to stitch and the
-- spans that contradict their parent, and each span's request. otel_outputs.sql defines the
-- otel_* views, each written to the table of that name.
-- No output is sorted here: the dataset sorts each table as it lays it out (traceq/sql/
-- layout.sql), out of core, so a sort here would only be paid twice.
-- Bounded memory: the pass runs under a fixed DuckDB memory limit (traceq/ingest/otel/
-- __init__.py) whatever the file size, so every statement is one DuckDB can spill: at most
-- one large hash join per statement (a pipeline probing two large hash tables at once does
-- not spill; such chains are split into temp tables, which do), no window over whole span
-- rows, and no window partition that grows with the file.

-- Seconds (a double, as vLLM writes gen_ai.latency.*) to integer nanoseconds.
CREATE OR REPLACE TEMP MACRO _sec_ns(x) AS CAST(round(TRY_CAST(x AS DOUBLE) * 1e9) AS BIGINT);
CREATE OR REPLACE TEMP MACRO _int(x) AS CAST(TRY_CAST(x AS DOUBLE) AS BIGINT);

-- A span seen twice (same trace and span id) is kept once, its first copy (lowest _span);
-- the later copies are rejected. Found with an aggregate over the key columns, not a window
-- over whole span rows: DuckDB's window holds a partition's rows with their JSON attributes
-- in memory, so a window over every span did not fit a bounded second pass.
CREATE OR REPLACE TEMP TABLE _dup_keys AS
SELECT trace_id, span_id, min(_span) AS first_span, min(_line) AS first_line
FROM stage_spans
GROUP BY ALL
HAVING count(*) > 1;

CREATE OR REPLACE TEMP VIEW otel_duplicates AS
SELECT
    format('line {} span {}', s._line, s._span) AS location,
    format('duplicate span {} of trace {} (first seen on line {})', s.span_id, s.trace_id, d.first_line)
        AS reason,
    s.name AS raw
FROM stage_spans AS s
JOIN _dup_keys AS d
    ON d.trace_id IS NOT DISTINCT FROM s.trace_id AND d.span_id IS NOT DISTINCT FROM s.span_id
WHERE s._span <> d.first_span;

CREATE OR REPLACE TEMP TABLE _kept AS
SELECT s.*
FROM stage_spans AS s
LEFT JOIN _dup_keys AS d
    ON d.trace_id IS NOT DISTINCT FROM s.trace_id AND d.span_id IS NOT DISTINCT FROM s.span_id
WHERE d.first_span IS NULL OR s._span = d.first_span;

-- Traces that cross processes (otel_stitch.sql): those with a span of a routing layer (`hop`,
-- traceq/ingest/otel/hops.py), or two vLLM engines of which one asked for a single token (a
-- prefill). Every other trace is read as one engine's, as before.
CREATE OR REPLACE TEMP TABLE _hop_traces AS
SELECT DISTINCT trace_id FROM _kept WHERE hop IS NOT NULL
UNION
SELECT DISTINCT k.trace_id
FROM _kept AS k
SEMI JOIN (SELECT trace_id FROM _kept WHERE name = 'llm_request' AND a_max_tokens = '1') AS p
    USING (trace_id)
WHERE k.name = 'llm_request' AND k.a_max_tokens IS DISTINCT FROM '1';

-- A span of such a trace that starts after its parent ended on the same instance contradicts
-- it (one clock, so no skew explains it): quarantined with the reason, and left out of the
-- stitch and the clock estimate; the rest of its trace is kept. 1 µs of slack, as for token
-- events (traceq/ingest/otel/token_checks.py, SPAN_SLACK_NS).
CREATE OR REPLACE TEMP TABLE _contradicted AS
WITH t AS (
    SELECT k._span, k._line, k.trace_id, k.span_id, k.parent_id, k.name, k.instance, k.t_start,
        k.t_end
    FROM _kept AS k
    SEMI JOIN _hop_traces USING (trace_id)
)
SELECT c._span, c._line, c.name, c.instance, c.t_start, p.name AS parent_name, p.t_end AS parent_end
FROM t AS c
JOIN t AS p ON p.trace_id = c.trace_id AND p.span_id = c.parent_id
WHERE p.instance IS NOT DISTINCT FROM c.instance AND c.t_start > p.t_end + 1000;

CREATE OR REPLACE TEMP VIEW otel_contradicted AS
SELECT
    format('line {} span {}', _line, _span) AS location,
    format(
        'span {} starts {} ns after its parent {} ended, on the same instance {}: left out of '
        || 'the stitched request (the rest of its trace is kept)',
        name, t_start - parent_end, parent_name, instance
    ) AS reason,
    name AS raw
FROM _contradicted;

DELETE FROM _kept WHERE _span IN (SELECT _span FROM _contradicted);

-- Each span's request: the nearest request span among itself and four ancestors (SGLang
-- `--enable-trace` nests stage slices under a thread span under the request root). A request span nested under another server-side request span is a stage of it
-- (vLLM-Omni `llm_request` stages under `omni_request`); under a CLIENT span it stays itself.
-- The walk up is one join per statement (_up1 .. _up3, then _owner).
CREATE OR REPLACE TEMP TABLE _hop0 AS
SELECT
    _span,
    trace_id,
    span_id,
    parent_id,
    instance,
    is_request,
    is_request AND kind IS DISTINCT FROM 'CLIENT' AS is_outer
FROM _kept;

CREATE OR REPLACE TEMP TABLE _up1 AS
SELECT
    c._span,
    c.instance,
    c.trace_id,
    c.is_request AS r0,
    p.trace_id AS t1,
    p.parent_id AS u1,
    p._span AS s1,
    p.is_request AS r1,
    p.is_outer AS o1
FROM _hop0 AS c
LEFT JOIN _hop0 AS p ON p.trace_id = c.trace_id AND p.span_id = c.parent_id;

CREATE OR REPLACE TEMP TABLE _up2 AS
SELECT
    a.*,
    p.trace_id AS t2,
    p.parent_id AS u2,
    p._span AS s2,
    p.is_request AS r2,
    p.is_outer AS o2
FROM _up1 AS a
LEFT JOIN _hop0 AS p ON p.trace_id = a.t1 AND p.span_id = a.u1;

CREATE OR REPLACE TEMP TABLE _up3 AS
SELECT
    a.*,
    p.trace_id AS t3,
    p.parent_id AS u3,
    p._span AS s3,
    p.is_request AS r3,
    p.is_outer AS o3
FROM _up2 AS a
LEFT JOIN _hop0 AS p ON p.trace_id = a.t2 AND p.span_id = a.u2;

CREATE OR REPLACE TEMP TABLE _owner AS
SELECT
    a._span,
    a.instance,
    a.trace_id,
    CASE
        WHEN a.r0 THEN a._span
        WHEN a.r1 THEN a.s1
        WHEN a.r2 THEN a.s2
        WHEN a.r3 THEN a.s3
        WHEN p.is_request THEN p._span
    END AS req_span,
    CASE
        WHEN NOT a.r0 THEN NULL
        WHEN a.r1 THEN CASE WHEN a.o1 THEN a.s1 END
        WHEN a.r2 THEN CASE WHEN a.o2 THEN a.s2 END
        WHEN a.r3 THEN CASE WHEN a.o3 THEN a.s3 END
    END AS outer_span
FROM _up3 AS a
LEFT JOIN _hop0 AS p ON p.trace_id = a.t3 AND p.span_id = a.u3;

DROP TABLE _up1;
DROP TABLE _up2;
DROP TABLE _up3;
DROP TABLE _hop0;

CREATE OR REPLACE TEMP TABLE _req_base AS
SELECT
    k._span,
    k.trace_id,
    k.span_id,
    k.t_start,
    o.outer_span,
    coalesce(k.a_request_id, k.a_rid, k.a_response_id, k.span_id) AS own_id,
    CASE k.kind WHEN 'CLIENT' THEN 'client' ELSE 'server' END AS view
FROM _kept AS k
JOIN _owner AS o USING (_span)
WHERE k.is_request;

-- The stage number is a window over the stages of one outer request only (a window over
-- every request would be one partition as large as the file).
CREATE OR REPLACE TEMP TABLE _req AS
SELECT _span, trace_id, span_id, own_id AS request_id, view
FROM _req_base
WHERE outer_span IS NULL
UNION ALL
-- a stage of a multi-stage request: `<root id>/stage<n>`, n by start time from 0
SELECT
    b._span,
    b.trace_id,
    b.span_id,
    format(
        '{}/stage{}',
        o.own_id,
        row_number() OVER (PARTITION BY b.outer_span ORDER BY b.t_start, b._span) - 1
    ) AS request_id,
    b.view
FROM _req_base AS b
LEFT JOIN _req_base AS o ON o._span = b.outer_span
WHERE b.outer_span IS NOT NULL;

DROP TABLE _req_base;

-- Each kept span's instance and request id (null outside a request), for spans and events.
CREATE OR REPLACE TEMP TABLE _span_req AS
SELECT o._span, o.instance, o.trace_id, r.request_id, r.view
FROM _owner AS o
LEFT JOIN _req AS r ON r._span = o.req_span;
