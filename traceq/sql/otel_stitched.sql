-- Second pass of the OpenTelemetry ingest, part 5: one request per stitched trace, its hops
-- and the traces no engine served, every stamp moved to the reference clock (otel_clocks.sql:
-- stamp - offset of the instance that stamped it). Inputs: otel_stitch.sql, otel_clocks.sql,
-- _req, _span_req (otel_finalize.sql).

CREATE OR REPLACE TEMP MACRO _fix(t, off) AS t - coalesce(off, 0);

-- Spans of the stitched traces on the reference clock.
CREATE OR REPLACE TEMP TABLE _ts_c AS
SELECT s.*, _fix(s.t_start, o.offset_ns) AS cs, _fix(s.t_end, o.offset_ns) AS ce
FROM _ts AS s
LEFT JOIN _clock AS o USING (instance);

-- Routing decisions: each ends at the latest when a worker it chose received the request (a
-- CLIENT route span stays open until the response ends; Dynamo's route_span.rs).
CREATE OR REPLACE TEMP TABLE _routes AS
SELECT r._span, least(any_value(r.ce), min(c.cs)) AS ce_decided
FROM _ts_c AS r
LEFT JOIN _ts_c AS c
    ON c.trace_id = r.trace_id AND c.parent_id = r.span_id AND c.instance <> r.instance
WHERE r.hop = 'router'
GROUP BY r._span;

-- Engines on the reference clock.
CREATE OR REPLACE TEMP TABLE _engines_c AS
SELECT
    e.*,
    coalesce(o.offset_ns, 0) AS off,
    _fix(e.t_arrival, o.offset_ns) AS c_arrival,
    _fix(e.t_end, o.offset_ns) AS c_end
FROM _roles AS e
LEFT JOIN _clock AS o USING (instance);

-- Per stitched trace: the served prefill (p) and decode or single engine (d), the first hop,
-- the routing time, and the request id: the decode engine's id, else the prefill's, the
-- caller's x-request-id, the gateway's, Dynamo's context id, the trace id.
CREATE OR REPLACE TEMP TABLE _stitch AS
WITH route AS (
    SELECT t.trace_id, sum(r.ce_decided - t.cs) AS route_ns
    FROM _routes AS r
    JOIN _ts_c AS t USING (_span)
    GROUP BY t.trace_id
),
base AS (
    SELECT
        f.trace_id,
        p._span AS p_span,
        d._span AS d_span,
        coalesce(d.request_id, p.request_id, f.x_request_id, f.gateway_id, f.dynamo_id, f.trace_id)
            AS base_id,
        route.route_ns,
        p.role IS NOT NULL OR d.role = 'decode' AS disagg
    FROM _trace_facts AS f
    LEFT JOIN _engines_c AS p ON p.trace_id = f.trace_id AND p.role = 'prefill' AND p.served
    LEFT JOIN _engines_c AS d ON d.trace_id = f.trace_id AND d.role <> 'prefill' AND d.served
    LEFT JOIN route ON route.trace_id = f.trace_id
    WHERE p._span IS NOT NULL OR d._span IS NOT NULL
),
-- an id another trace of this source also uses names the request with its trace too, so that
-- ids that collide across traces never merge two requests
collide AS (
    SELECT DISTINCT b.base_id
    FROM base AS b
    JOIN (SELECT request_id, trace_id FROM _req) AS r
        ON r.request_id = b.base_id AND r.trace_id <> b.trace_id
    UNION
    SELECT base_id FROM base GROUP BY base_id HAVING count(*) > 1
)
SELECT
    b.*,
    CASE
        WHEN b.base_id IN (SELECT base_id FROM collide) THEN b.base_id || '@' || b.trace_id
        ELSE b.base_id
    END AS request_id
FROM base AS b;

-- The deepest error any span of a stitched trace reports (a child's before its parent's).
CREATE OR REPLACE TEMP TABLE _trace_error AS
SELECT trace_id, arg_max(span_error, t_start) AS error
FROM _ts
WHERE span_error IS NOT NULL
GROUP BY trace_id;

-- The stitched requests (view server). A single-engine request keeps its engine's stamps and
-- meaning; a disaggregated one arrives at its first hop and ends when that hop finished.
CREATE OR REPLACE TEMP TABLE _stitched AS
SELECT
    s.request_id,
    'server' AS view,
    coalesce(d.instance, p.instance) AS instance,
    coalesce(d.model, p.model) AS model,
    CASE
        WHEN s.disagg THEN coalesce(_fix(f.t_start, fo.offset_ns), p.c_arrival, d.c_arrival)
        ELSE d.c_arrival
    END AS t_arrival,
    CASE WHEN s.disagg THEN coalesce(p.c_arrival, d.c_arrival) END AS t_engine_arrival,
    CASE WHEN s.disagg THEN _fix(p.t_tokenized, p.off) ELSE _fix(d.t_tokenized, d.off) END
        AS t_tokenized,
    CASE WHEN s.disagg THEN _fix(p.t_queued, p.off) ELSE _fix(d.t_queued, d.off) END AS t_queued,
    CASE WHEN s.disagg THEN _fix(p.t_scheduled, p.off) ELSE _fix(d.t_scheduled, d.off) END
        AS t_scheduled,
    CASE WHEN s.disagg THEN _fix(p.t_first_token, p.off) END AS t_prefill_end,
    _fix(d.t_kv_transfer_start, d.off) AS t_kv_transfer_start,
    _fix(d.t_kv_transfer_end, d.off) AS t_kv_transfer_end,
    CASE WHEN s.disagg THEN _fix(d.t_queued, d.off) END AS t_decode_queued,
    CASE WHEN s.disagg THEN _fix(d.t_scheduled, d.off) END AS t_decode_scheduled,
    _fix(d.t_first_token, d.off) AS t_first_token,
    _fix(d.t_last_token, d.off) AS t_last_token,
    CASE WHEN s.disagg THEN _fix(f.t_end, fo.offset_ns) END AS t_done,
    coalesce(p.prompt_tokens, d.prompt_tokens) AS prompt_tokens,
    d.output_tokens,
    coalesce(p.cached_tokens, d.cached_tokens) AS cached_tokens,
    d.max_tokens,
    d.finish_reason,
    coalesce(
        d.error, p.error, CASE WHEN d._span IS NULL THEN coalesce(e.error, 'no decode engine') END
    ) AS error,
    CASE
        WHEN p.n_preemptions IS NOT NULL OR d.n_preemptions IS NOT NULL
            THEN coalesce(p.n_preemptions, 0) + coalesce(d.n_preemptions, 0)
    END AS n_preemptions,
    d.streaming,
    1 AS time_resolution_ns,
    s.trace_id,
    s.route_ns,
    CASE WHEN s.disagg THEN p.instance END AS prefill_instance,
    CASE WHEN s.disagg THEN d.instance END AS decode_instance,
    coalesce(d.signal, p.signal) AS role_signal
FROM _stitch AS s
LEFT JOIN _engines_c AS p ON p._span = s.p_span
LEFT JOIN _engines_c AS d ON d._span = s.d_span
LEFT JOIN _first_hop AS f ON f.trace_id = s.trace_id
LEFT JOIN _clock AS fo ON fo.instance = f.instance
LEFT JOIN _trace_error AS e ON e.trace_id = s.trace_id;

-- Traces some layer saw and no engine of this source served; the lost_requests view keeps
-- those no other source's engine served either. Client-only traces (a CLIENT root and nothing
-- else in this file) are candidates too: their server may be in another file.
CREATE OR REPLACE TEMP TABLE _unserved AS
WITH hop_only AS (
    SELECT * FROM _ts_c ANTI JOIN _engines USING (trace_id)
),
last_hop AS (
    SELECT trace_id, arg_max(
        {'hop': CASE WHEN is_client_root THEN 'client' WHEN hop = 'ingress' THEN 'worker'
            ELSE coalesce(hop, 'gateway') END, 'instance': instance},
        (CASE WHEN is_client_root THEN 0 WHEN hop = 'gateway' THEN 1 WHEN hop = 'router' THEN 2
            WHEN hop = 'proxy' THEN 3 WHEN hop = 'ingress' THEN 4 ELSE 1 END) * 1e19 + t_start
    ) AS h, min(cs) AS ts
    FROM hop_only
    WHERE hop IN ('gateway', 'router', 'proxy', 'ingress') OR is_client_root
    GROUP BY trace_id
),
roots AS (
    SELECT
        trace_id, instance, t_start, a_request_id,
        CASE
            WHEN status_code = 'ERROR' THEN coalesce(a_error_type, nullif(status_message, ''), 'ERROR')
            ELSE a_error_type
        END AS span_error
    FROM _kept
    WHERE kind = 'CLIENT' AND parent_id IS NULL
),
answered AS (
    SELECT DISTINCT trace_id FROM _kept SEMI JOIN roots USING (trace_id)
    WHERE kind IS DISTINCT FROM 'CLIENT'
)
SELECT
    l.trace_id,
    coalesce(f.x_request_id, f.gateway_id, f.dynamo_id, f.client_id, l.trace_id) AS request_id,
    concat_ws(', ', f.x_request_id, f.gateway_id, f.dynamo_id, f.client_id) AS ids,
    l.h.hop AS hop,
    l.h.instance AS instance,
    e.error,
    l.ts
FROM last_hop AS l
LEFT JOIN _trace_facts AS f USING (trace_id)
LEFT JOIN _trace_error AS e USING (trace_id)
UNION ALL
SELECT r.trace_id, coalesce(r.a_request_id, r.trace_id), r.a_request_id, 'client', r.instance,
    r.span_error, r.t_start
FROM roots AS r
ANTI JOIN answered USING (trace_id)
ANTI JOIN _hop_traces USING (trace_id);

-- Which request each stitched trace's spans and events belong to.
CREATE OR REPLACE TEMP TABLE _trace_req AS
SELECT trace_id, request_id FROM _stitch
UNION ALL
SELECT u.trace_id, u.request_id FROM _unserved AS u SEMI JOIN _hop_traces USING (trace_id);

UPDATE _span_req
SET request_id = t.request_id
FROM _trace_req AS t
WHERE _span_req.trace_id = t.trace_id AND _span_req.view IS DISTINCT FROM 'client';

-- The request spans a stitched row replaces (otel_outputs.sql leaves them out of requests),
-- and which of them lend their tokens: the served decode (or single) engine's, moved to the
-- reference clock. The prefill's one token is its t_prefill_end; an attempt that did not
-- produce the response keeps its hop in request_hops.
CREATE OR REPLACE TEMP TABLE _req_fix AS
SELECT
    r._span,
    t.request_id,
    coalesce(d.off, 0) AS shift_ns,
    d._span IS NOT NULL AS keep
FROM _req AS r
JOIN _trace_req AS t USING (trace_id)
LEFT JOIN _engines_c AS d ON d._span = r._span AND d.role <> 'prefill' AND d.served
WHERE r.view = 'server';

-- One row per hop of each stitched (or unserved) trace.
CREATE OR REPLACE TEMP TABLE _hops AS
SELECT
    trace_id,
    CASE WHEN is_client_root THEN 'client' ELSE hop END AS hop,
    instance,
    cs AS t_start,
    coalesce(r.ce_decided, ce) AS t_end,
    name,
    span_id,
    coalesce(a_x_request_id, a_dynamo_request_id, a_plain_request_id, a_request_id)
        AS hop_request_id,
    NULL::BOOLEAN AS served,
    a_route_phase AS detail,
    coalesce(a_worker_id, a_decode_target, a_prefill_target) AS worker,
    _int(a_overlap_blocks) AS overlap_blocks
FROM _ts_c
LEFT JOIN _routes AS r USING (_span)
WHERE hop IN ('gateway', 'router', 'proxy') OR is_client_root
UNION ALL
SELECT
    trace_id,
    CASE role WHEN 'prefill' THEN 'prefill' ELSE 'decode' END,
    instance,
    c_arrival,
    c_end,
    name,
    span_id,
    request_id,
    served,
    concat_ws(
        '; ',
        CASE WHEN signal IS NOT NULL THEN 'role from ' || signal END,
        CASE
            WHEN served AND (SELECT count(*) FROM _roles AS o
                WHERE o.trace_id = e.trace_id AND (o.role = 'prefill') = (e.role = 'prefill')) > 1
                THEN 'produced the response (of several attempts)'
            WHEN NOT served THEN 'did not produce the response' || coalesce(': ' || error, '')
        END
    ),
    NULL,
    NULL
FROM _engines_c AS e
UNION ALL
SELECT
    trace_id, 'kv_transfer', instance, _fix(t_kv_transfer_start, off), _fix(t_kv_transfer_end, off),
    'kv_transfer', NULL, request_id, served, NULL, NULL, NULL
FROM _engines_c
WHERE role <> 'prefill' AND t_kv_transfer_start IS NOT NULL AND t_kv_transfer_end IS NOT NULL;

-- Cross-host intervals each offset corrects, for the ingest's warning: first hop to the
-- prefill engine's arrival (prefill instance), first hop to the first token (decode instance).
CREATE OR REPLACE TEMP TABLE _clock_use AS
SELECT instance, median(ns) / 1e6 AS corrects_ms
FROM (
    SELECT prefill_instance AS instance, t_engine_arrival - t_arrival AS ns FROM _stitched
    UNION ALL
    SELECT decode_instance, t_first_token - t_arrival FROM _stitched
)
WHERE instance IS NOT NULL AND ns IS NOT NULL
GROUP BY instance;
