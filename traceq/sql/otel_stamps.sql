-- Second pass of the OpenTelemetry ingest, part 2 of 4 (traceq/ingest/otel/__init__.py runs
-- otel_finalize, otel_stamps, otel_stitch with otel_clocks, otel_outputs): each request
-- span's stamps as one engine saw them. Inputs: _kept, _owner, _req (otel_finalize.sql),
-- stage_events. Bounded memory as otel_finalize.sql says. Stamp precedence (docs/METRICS.md):
-- token events / arrays, then phase child spans (vLLM, SGLang), then engine-core events, then
-- gen_ai.latency.* attributes, then the span's own start / end.

-- SGLang decode_loop slices that cannot be a request's decode steps: slices that overlap (a
-- step starting before the previous one ended) or end outside the request span by more than
-- 1 µs (float64 epoch seconds round to ~0.24 µs; traceq/ingest/otel/token_checks.py). Such a
-- request's steps give no tokens (one quarantine row says why); the request is kept, its
-- stamps from its prefill / decode slices and attributes.
CREATE OR REPLACE TEMP TABLE _steps AS
SELECT o.req_span AS _span, k._span AS step_span, k.t_start, k.t_end
FROM _kept AS k
JOIN _owner AS o USING (_span)
WHERE k.role = 'decode_step' AND o.req_span IS NOT NULL;

CREATE OR REPLACE TEMP TABLE _bad_steps AS
WITH steps AS (
    SELECT
        _span,
        t_start,
        t_end,
        lag(t_end) OVER (PARTITION BY _span ORDER BY t_start, step_span) AS prev_end
    FROM _steps
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
CREATE OR REPLACE TEMP TABLE _child_spans AS
SELECT o.req_span AS _span, k.role, k.t_start, k.t_end, k.a_preempted
FROM _kept AS k
JOIN _owner AS o USING (_span)
WHERE k.role IS NOT NULL AND NOT k.is_request AND o.req_span IS NOT NULL;

CREATE OR REPLACE TEMP TABLE _children AS
SELECT
    k._span,
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
FROM _child_spans AS k
LEFT JOIN _bad_steps AS b ON b._span = k._span
GROUP BY k._span;

DROP TABLE _child_spans;

-- SGLang marks an aborted request on its thread span, not its root (TraceReqContext.abort,
-- sglang observability/trace.py): status ERROR, and as attributes the finish reason's fields
-- (FINISH_ABORT: `type` abort, `message`, `status_code`, `err_type`) or one `reason` (older
-- tracing/trace.py: `abort_info`). An abort with an HTTP status is a rejection (a prompt too
-- long: 400 BadRequestError); one without is finish reason `abort`, as vLLM writes any
-- aborted request (a client that left, or a server-side abort such as a lost remote
-- prefill). The tracer's own "have unclosed span, auto closed" (its destructor) says nothing
-- of the request. Of several such spans, the first to end (then the lowest span) speaks.
CREATE OR REPLACE TEMP TABLE _thread_aborts AS
SELECT _span, error, aborted
FROM (
    SELECT
        o.req_span AS _span,
        k.t_end,
        k._span AS thread_span,
        coalesce(
            nullif(json_extract_string(k.attributes_json, '$.err_type'), ''),
            nullif(json_extract_string(k.attributes_json, '$.message'), ''),
            nullif(json_extract_string(k.attributes_json, '$.reason'), ''),
            nullif(json_extract_string(k.attributes_json, '$.abort_info'), ''),
            nullif(k.status_message, ''),
            'abort'
        ) AS error,
        coalesce(
            json_extract_string(k.attributes_json, '$.type') = 'abort'
                AND json_extract_string(k.attributes_json, '$.status_code') IS NULL,
            false
        ) AS aborted
    FROM _kept AS k
    JOIN _owner AS o USING (_span)
    JOIN _kept AS r ON r._span = o.req_span
    WHERE k.status_code = 'ERROR' AND NOT k.is_request AND k.role IS NULL
      AND r.a_rid IS NOT NULL
)
WHERE error <> 'have unclosed span, auto closed'
QUALIFY row_number() OVER (PARTITION BY _span ORDER BY t_end, thread_span) = 1;

-- Span events of each request (and of its descendants): engine-core queued / scheduled,
-- preemptions (vLLM PREEMPTED, SGLang retract), TensorRT-LLM KV-transfer boundaries.
CREATE OR REPLACE TEMP TABLE _request_events AS
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
CREATE OR REPLACE TEMP TABLE _step_tokens AS
WITH steps AS (
    SELECT _span, t_end AS ts, t_start AS t_scheduled
    FROM _steps
    WHERE _span NOT IN (SELECT _span FROM _bad_steps)
    UNION ALL
    SELECT _span, prefill_end, prefill_start FROM _children
    WHERE decode_steps > 0 AND prefill_end IS NOT NULL
)
SELECT
    _span,
    ts,
    t_scheduled,
    CAST(row_number() OVER (PARTITION BY _span ORDER BY ts) - 1 AS BIGINT) AS idx
FROM steps
-- a request that also has token events keeps those (they are finer)
WHERE _span IN (SELECT _span FROM _kept WHERE is_request AND tok_chunks IS NULL);

-- Each request's child-span and event stamps beside its id, one join per statement.
CREATE OR REPLACE TEMP TABLE _req_children AS
SELECT
    r.*,
    c.tokenize_end AS c_tokenize_end,
    c.queue_start AS c_queue_start,
    c.queue_end AS c_queue_end,
    c.decode_queue_start AS c_decode_queue_start,
    c.decode_queue_end AS c_decode_queue_end,
    c.prefill_start AS c_prefill_start,
    c.prefill_end AS c_prefill_end,
    c.decode_start AS c_decode_start,
    c.decode_end AS c_decode_end,
    c.decode_steps AS c_decode_steps,
    c.step_last AS c_step_last,
    c.kv_start AS c_kv_start,
    c.kv_end AS c_kv_end,
    c.phase_spans AS c_phase_spans,
    c.preempted_spans AS c_preempted_spans
FROM _req AS r
LEFT JOIN _children AS c USING (_span);

CREATE OR REPLACE TEMP TABLE _req_stamps AS
SELECT
    r.*,
    ev.queued AS ev_queued,
    ev.scheduled AS ev_scheduled,
    ev.preemptions AS ev_preemptions,
    ev.kv_start AS ev_kv_start,
    ev.kv_end AS ev_kv_end,
    ev.engine_events AS ev_engine_events,
    ab.error AS ab_error,
    ab.aborted AS ab_aborted
FROM _req_children AS r
LEFT JOIN _request_events AS ev USING (_span)
LEFT JOIN _thread_aborts AS ab USING (_span);

DROP TABLE _thread_aborts;

DROP TABLE _req_children;

-- One row per request span, as one engine saw it (otel_stitch.sql merges the engines of a
-- routed or disaggregated trace into one request; otel_outputs.sql writes the rest as they are).
CREATE OR REPLACE TEMP VIEW _engine_requests AS
SELECT * EXCLUDE (_scheduled, _queued) FROM (
SELECT
    x._span,
    s.trace_id,
    x.request_id,
    x.view,
    s.instance,
    coalesce(s.a_response_model, s.a_request_model) AS model,
    s.t_start AS t_arrival,
    coalesce(x.c_kv_start, x.ev_kv_start) AS t_kv_transfer_start,
    coalesce(x.c_kv_end, x.ev_kv_end) AS t_kv_transfer_end,
    -- with a KV transfer and no tokenize span, the time before the transfer is the first phase
    coalesce(
        x.c_tokenize_end,
        CASE WHEN t_kv_transfer_start IS NOT NULL THEN greatest(s.t_start, t_kv_transfer_start) END
    ) AS t_tokenized,
    coalesce(
        s.tok_first, x.c_prefill_end, x.c_decode_start, s.t_start + _sec_ns(s.a_ttft_s)
    ) AS t_first_token,
    coalesce(
        s.tok_last,
        x.c_step_last,
        x.c_decode_end,
        -- SGLang, a single output token: no decode slices, the prefill produced it
        CASE WHEN s.a_rid IS NOT NULL THEN x.c_prefill_end END,
        s.t_start + _sec_ns(s.a_e2e_s),
        t_first_token + _sec_ns(s.a_decode_s),
        s.t_end
    ) AS t_last_token,
    coalesce(
        x.c_queue_end,
        x.c_prefill_start,
        x.c_decode_queue_end,
        x.ev_scheduled,
        -- SGLang's time_in_model_prefill includes queueing (research §3): its slices win
        CASE WHEN s.a_rid IS NULL THEN t_first_token - _sec_ns(s.a_prefill_s) END,
        coalesce(x.c_tokenize_end, s.t_start) + _sec_ns(s.a_queue_s)
    ) AS _scheduled,
    coalesce(
        x.c_queue_start,
        x.c_decode_queue_start,
        x.ev_queued,
        _scheduled - _sec_ns(s.a_queue_s),
        x.c_tokenize_end
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
        CASE WHEN s.a_rid IS NOT NULL AND x.c_prefill_end IS NOT NULL THEN x.c_decode_steps + 1 END
    ) AS output_tokens,
    _int(coalesce(s.a_cached_tokens, s.a_cache_read_tokens, s.a_step_cached_tokens))
        AS cached_tokens,
    _int(s.a_max_tokens) AS max_tokens,
    coalesce(
        CASE
            WHEN starts_with(s.a_finish_reasons, '{')
                THEN TRY(json_extract_string(s.a_finish_reasons, '$.values[0].stringValue'))
            WHEN starts_with(s.a_finish_reasons, '[')
                THEN TRY(json_extract_string(s.a_finish_reasons, '$[0]'))
            ELSE s.a_finish_reasons
        END,
        CASE WHEN x.ab_aborted THEN 'abort' END
    ) AS finish_reason,
    CASE
        WHEN s.status_code = 'ERROR'
            THEN coalesce(s.a_error_type, nullif(s.status_message, ''), 'ERROR')
        ELSE coalesce(s.a_error_type, x.ab_error)
    END AS error,
    CASE
        WHEN x.c_phase_spans > 0 OR x.ev_engine_events > 0 OR s.a_rid IS NOT NULL
            THEN coalesce(x.c_preempted_spans, 0) + coalesce(x.ev_preemptions, 0)
    END AS n_preemptions,
    s.tok_chunks IS NOT NULL OR x.c_decode_steps > 0 AS streaming,
    1 AS time_resolution_ns
FROM _kept AS s
JOIN _req_stamps AS x USING (_span)
);
