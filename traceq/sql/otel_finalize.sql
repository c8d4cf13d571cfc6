-- Second pass of the OpenTelemetry ingest, over one source's staged rows.
-- Inputs (views the ingester creates over its scratch Parquet): stage_spans, stage_tokens,
-- stage_events. Outputs: the otel_* views below, each written to the table of that name.
-- No output is sorted here: the dataset sorts each table as it lays it out (traceq/sql/
-- layout.sql), out of core, so a sort here would only be paid twice.
-- Stamp precedence for each request (docs/METRICS.md): token events / arrays, then phase
-- child spans (vLLM, SGLang), then engine-core events, then gen_ai.latency.* attributes,
-- then the span's own start / end.

-- Seconds (a double, as vLLM writes gen_ai.latency.*) to integer nanoseconds.
CREATE OR REPLACE TEMP MACRO _sec_ns(x) AS CAST(round(TRY_CAST(x AS DOUBLE) * 1e9) AS BIGINT);
CREATE OR REPLACE TEMP MACRO _int(x) AS CAST(TRY_CAST(x AS DOUBLE) AS BIGINT);

CREATE OR REPLACE TEMP VIEW _ranked AS
SELECT
    *,
    row_number() OVER (PARTITION BY trace_id, span_id ORDER BY _span) AS copy_no,
    min(_line) OVER (PARTITION BY trace_id, span_id) AS first_line
FROM stage_spans;

-- A span seen twice (same trace and span id) is kept once; the later copies are rejected.
CREATE OR REPLACE TEMP VIEW otel_duplicates AS
SELECT
    format('line {} span {}', _line, _span) AS location,
    format('duplicate span {} of trace {} (first seen on line {})', span_id, trace_id, first_line)
        AS reason,
    name AS raw
FROM _ranked
WHERE copy_no > 1;

CREATE OR REPLACE TEMP TABLE _kept AS
SELECT * EXCLUDE (copy_no, first_line) FROM _ranked WHERE copy_no = 1;

-- Each span's request: the nearest request span among itself and four ancestors (SGLang
-- nests stage slices under a thread span under the request root: research/otel_producers.md
-- §3). A request span nested under another server-side request span is a stage of it
-- (vLLM-Omni `llm_request` stages under `omni_request`); under a CLIENT span it stays itself.
CREATE OR REPLACE TEMP TABLE _owner AS
WITH k AS (
    SELECT
        _span,
        trace_id,
        span_id,
        parent_id,
        is_request,
        is_request AND kind IS DISTINCT FROM 'CLIENT' AS is_outer
    FROM _kept
)
SELECT
    c._span,
    CASE
        WHEN c.is_request THEN c._span
        WHEN p1.is_request THEN p1._span
        WHEN p2.is_request THEN p2._span
        WHEN p3.is_request THEN p3._span
        WHEN p4.is_request THEN p4._span
    END AS req_span,
    CASE
        WHEN NOT c.is_request THEN NULL
        WHEN p1.is_request THEN CASE WHEN p1.is_outer THEN p1._span END
        WHEN p2.is_request THEN CASE WHEN p2.is_outer THEN p2._span END
        WHEN p3.is_request THEN CASE WHEN p3.is_outer THEN p3._span END
    END AS outer_span
FROM k AS c
LEFT JOIN k AS p1 ON p1.trace_id = c.trace_id AND p1.span_id = c.parent_id
LEFT JOIN k AS p2 ON p2.trace_id = p1.trace_id AND p2.span_id = p1.parent_id
LEFT JOIN k AS p3 ON p3.trace_id = p2.trace_id AND p3.span_id = p2.parent_id
LEFT JOIN k AS p4 ON p4.trace_id = p3.trace_id AND p4.span_id = p3.parent_id;

CREATE OR REPLACE TEMP TABLE _req AS
WITH base AS (
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
    WHERE k.is_request
)
SELECT
    b._span,
    b.trace_id,
    b.span_id,
    -- a stage of a multi-stage request: `<root id>/stage<n>`, n by start time from 0
    CASE
        WHEN b.outer_span IS NULL THEN b.own_id
        ELSE format(
            '{}/stage{}',
            o.own_id,
            row_number() OVER (PARTITION BY b.outer_span ORDER BY b.t_start, b._span) - 1
        )
    END AS request_id,
    b.view
FROM base AS b
LEFT JOIN base AS o ON o._span = b.outer_span;

-- SGLang decode_loop slices that cannot be a request's decode steps: slices that overlap (a
-- step starting before the previous one ended) or end outside the request span by more than
-- 1 µs (float64 epoch seconds round to ~0.24 µs; traceq/ingest/otel/token_checks.py). Such a
-- request's steps give no tokens (one quarantine row says why); the request is kept, its
-- stamps from its prefill / decode slices and attributes.
CREATE OR REPLACE TEMP TABLE _bad_steps AS
WITH steps AS (
    SELECT
        o.req_span AS _span,
        k.t_start,
        k.t_end,
        lag(k.t_end) OVER (PARTITION BY o.req_span ORDER BY k.t_start, k._span) AS prev_end
    FROM _kept AS k
    JOIN _owner AS o USING (_span)
    WHERE k.role = 'decode_step' AND o.req_span IS NOT NULL
),
per_request AS (
    SELECT
        s._span,
        count(*) AS n,
        min(s.t_start) AS t_min,
        max(s.t_end) AS t_max,
        count(*) FILTER (WHERE s.t_start < s.prev_end) AS overlaps
    FROM steps AS s
    GROUP BY s._span
)
SELECT
    p.*,
    r._line,
    CASE
        WHEN p.overlaps > 0 THEN format('{} of {} decode_loop slices overlap the one before', p.overlaps, p.n)
        WHEN p.t_min < r.t_start - 1000
            THEN format('decode_loop slice starts {} ns before its request span', r.t_start - p.t_min)
        WHEN p.t_max > r.t_end + 1000
            THEN format('decode_loop slice ends {} ns after its request span', p.t_max - r.t_end)
    END AS reason
FROM per_request AS p
JOIN _kept AS r USING (_span)
WHERE p.overlaps > 0 OR p.t_min < r.t_start - 1000 OR p.t_max > r.t_end + 1000;

CREATE OR REPLACE TEMP VIEW otel_bad_steps AS
SELECT
    format('line {} span {}', _line, _span) AS location,
    reason,
    format('{} decode_loop slices, {} .. {}', n, t_min, t_max) AS raw
FROM _bad_steps;

-- Intervals given by child spans (nearest request ancestor): tokenize; vLLM's queue /
-- prefill / decode spans; SGLang's stage slices; KV transfer (disaggregated serving).
CREATE OR REPLACE TEMP VIEW _children AS
SELECT
    o.req_span AS _span,
    max(k.t_end) FILTER (WHERE k.role = 'tokenize') AS tokenize_end,
    min(k.t_start) FILTER (WHERE k.role = 'queue') AS queue_start,
    max(k.t_end) FILTER (WHERE k.role = 'queue') AS queue_end,
    min(k.t_start) FILTER (WHERE k.role = 'decode_queue') AS decode_queue_start,
    min(k.t_end) FILTER (WHERE k.role = 'decode_queue') AS decode_queue_end,
    min(k.t_start) FILTER (WHERE k.role = 'prefill') AS prefill_start,
    -- the first prefill's end is the first token (a retracted request prefills again)
    min(k.t_end) FILTER (WHERE k.role = 'prefill') AS prefill_end,
    min(k.t_start) FILTER (WHERE k.role = 'decode') AS decode_start,
    max(k.t_end) FILTER (WHERE k.role = 'decode') AS decode_end,
    count(*) FILTER (WHERE k.role = 'decode_step' AND b._span IS NULL) AS decode_steps,
    max(k.t_end) FILTER (WHERE k.role = 'decode_step' AND b._span IS NULL) AS step_last,
    min(k.t_start) FILTER (WHERE k.role = 'kv_transfer') AS kv_start,
    max(k.t_end) FILTER (WHERE k.role = 'kv_transfer') AS kv_end,
    count(*) FILTER (WHERE k.role IN ('queue', 'prefill', 'decode')) AS phase_spans,
    count(*) FILTER (WHERE k.a_preempted = 'true') AS preempted_spans
FROM _kept AS k
JOIN _owner AS o USING (_span)
LEFT JOIN _bad_steps AS b ON b._span = o.req_span
WHERE k.role IS NOT NULL AND NOT k.is_request AND o.req_span IS NOT NULL
GROUP BY ALL;

-- Span events of each request (and of its descendants): engine-core queued / scheduled,
-- preemptions (vLLM PREEMPTED, SGLang retract), TensorRT-LLM KV-transfer boundaries.
CREATE OR REPLACE TEMP VIEW _request_events AS
SELECT
    o.req_span AS _span,
    min(e.ts) FILTER (WHERE e.kind = 'queued') AS queued,
    min(e.ts) FILTER (WHERE e.kind = 'scheduled') AS scheduled,
    count(*) FILTER (WHERE e.kind = 'preemption') AS preemptions,
    min(e.ts) FILTER (WHERE e.kind = 'otel:kv_cache_transfer_start') AS kv_start,
    max(e.ts) FILTER (WHERE e.kind = 'otel:kv_cache_transfer_end') AS kv_end,
    count(*) FILTER (WHERE e.kind IN ('queued', 'scheduled', 'preemption')) AS engine_events
FROM stage_events AS e
JOIN _owner AS o USING (_span)
WHERE o.req_span IS NOT NULL
GROUP BY ALL;

-- SGLang per-step timing: the first token at the end of prefill_forward, then one chunk at
-- the end of each decode_loop slice (research §6.2), scheduled at the slice start.
CREATE OR REPLACE TEMP VIEW _step_tokens AS
WITH steps AS (
    SELECT o.req_span AS _span, k.t_end AS ts, k.t_start AS t_scheduled
    FROM _kept AS k
    JOIN _owner AS o USING (_span)
    WHERE k.role = 'decode_step' AND o.req_span IS NOT NULL
        AND o.req_span NOT IN (SELECT _span FROM _bad_steps)
    UNION ALL
    SELECT _span, prefill_end, prefill_start FROM _children
    WHERE decode_steps > 0 AND prefill_end IS NOT NULL
)
SELECT
    _span,
    ts,
    t_scheduled,
    CAST(row_number() OVER (PARTITION BY _span ORDER BY ts) - 1 AS BIGINT) AS idx
FROM steps;

CREATE OR REPLACE TEMP VIEW otel_requests AS
SELECT * EXCLUDE (_scheduled, _queued) FROM (
SELECT
    r.request_id,
    r.view,
    s.instance,
    coalesce(s.a_response_model, s.a_request_model) AS model,
    s.t_start AS t_arrival,
    coalesce(c.kv_start, ev.kv_start) AS t_kv_transfer_start,
    coalesce(c.kv_end, ev.kv_end) AS t_kv_transfer_end,
    -- with a KV transfer and no tokenize span, the time before the transfer is the first phase
    coalesce(
        c.tokenize_end,
        CASE WHEN t_kv_transfer_start IS NOT NULL THEN greatest(s.t_start, t_kv_transfer_start) END
    ) AS t_tokenized,
    coalesce(
        s.tok_first, c.prefill_end, c.decode_start, s.t_start + _sec_ns(s.a_ttft_s)
    ) AS t_first_token,
    coalesce(
        s.tok_last,
        c.step_last,
        c.decode_end,
        -- SGLang, a single output token: no decode slices, the prefill produced it
        CASE WHEN s.a_rid IS NOT NULL THEN c.prefill_end END,
        s.t_start + _sec_ns(s.a_e2e_s),
        t_first_token + _sec_ns(s.a_decode_s),
        s.t_end
    ) AS t_last_token,
    coalesce(
        c.queue_end,
        c.prefill_start,
        c.decode_queue_end,
        ev.scheduled,
        -- SGLang's time_in_model_prefill includes queueing (research §3): its slices win
        CASE WHEN s.a_rid IS NULL THEN t_first_token - _sec_ns(s.a_prefill_s) END,
        coalesce(c.tokenize_end, s.t_start) + _sec_ns(s.a_queue_s)
    ) AS _scheduled,
    coalesce(
        c.queue_start,
        c.decode_queue_start,
        ev.queued,
        _scheduled - _sec_ns(s.a_queue_s),
        c.tokenize_end
    ) AS _queued,
    -- the queue starts once the KV cache has arrived (docs/METRICS.md, KV transfer)
    CASE
        WHEN t_kv_transfer_end IS NULL OR _queued IS NULL OR _scheduled IS NULL THEN _queued
        ELSE least(greatest(_queued, t_kv_transfer_end), _scheduled)
    END AS t_queued,
    _scheduled AS t_scheduled,
    _int(coalesce(s.a_prompt_tokens, s.a_input_tokens)) AS prompt_tokens,
    coalesce(
        _int(coalesce(s.a_completion_tokens, s.a_output_tokens)),
        s.tok_count,
        CASE WHEN s.a_rid IS NOT NULL AND c.prefill_end IS NOT NULL THEN c.decode_steps + 1 END
    ) AS output_tokens,
    _int(coalesce(s.a_cached_tokens, s.a_cache_read_tokens, s.a_step_cached_tokens))
        AS cached_tokens,
    _int(s.a_max_tokens) AS max_tokens,
    CASE
        WHEN starts_with(s.a_finish_reasons, '{')
            THEN TRY(json_extract_string(s.a_finish_reasons, '$.values[0].stringValue'))
        WHEN starts_with(s.a_finish_reasons, '[')
            THEN TRY(json_extract_string(s.a_finish_reasons, '$[0]'))
        ELSE s.a_finish_reasons
    END AS finish_reason,
    CASE
        WHEN s.status_code = 'ERROR'
            THEN coalesce(s.a_error_type, nullif(s.status_message, ''), 'ERROR')
        ELSE s.a_error_type
    END AS error,
    CASE
        WHEN c.phase_spans > 0 OR ev.engine_events > 0 OR s.a_rid IS NOT NULL
            THEN coalesce(c.preempted_spans, 0) + coalesce(ev.preemptions, 0)
    END AS n_preemptions,
    s.tok_chunks IS NOT NULL OR c.decode_steps > 0 AS streaming,
    1 AS time_resolution_ns
FROM _kept AS s
JOIN _req AS r USING (_span)
LEFT JOIN _children AS c USING (_span)
LEFT JOIN _request_events AS ev USING (_span)
);

-- gap_ns (TBT, the time since the previous chunk of the same request) is left null: the
-- dataset fills it while it writes the tokens sorted by request and idx (traceq/layout.py),
-- so no window over every chunk runs here; token_gaps is a projection (views.sql).
CREATE OR REPLACE TEMP VIEW otel_tokens AS
WITH chunks AS (
    SELECT
        r.request_id,
        r.view,
        t.idx,
        t.ts,
        t.n_tokens,
        t.t_scheduled,
        t.batch_size,
        t.waiting,
        t.total_tokens,
        t.time_base
    FROM stage_tokens AS t
    JOIN _req AS r USING (_span)
    UNION ALL
    SELECT r.request_id, r.view, t.idx, t.ts, 1, t.t_scheduled, NULL, NULL, NULL, 'epoch'
    FROM _step_tokens AS t
    JOIN _req AS r USING (_span)
    -- a request that also has token events keeps those (they are finer)
    JOIN _kept AS k USING (_span)
    WHERE k.tok_chunks IS NULL
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
    r.request_id
FROM _kept AS k
JOIN _owner AS o USING (_span)
LEFT JOIN _req AS r ON r._span = o.req_span;

CREATE OR REPLACE TEMP VIEW otel_events AS
SELECT
    e.ts,
    k.instance,
    e.kind,
    'INFO' AS severity,
    r.request_id,
    e.value,
    e.message
FROM stage_events AS e
JOIN _kept AS k USING (_span)
JOIN _owner AS o USING (_span)
LEFT JOIN _req AS r ON r._span = o.req_span;
