-- Second pass of the OpenTelemetry ingest, over one source's staged rows.
-- Inputs (views the ingester creates over its scratch Parquet): stage_spans, stage_tokens,
-- stage_events. Outputs: the otel_* views below, each written to the table of that name.
-- requests are written in arrival order; tokens in the order of their request spans in the
-- file, each request's chunks together and in time order (but where the parallel join hands
-- over a block: no sort is paid for), so row-group statistics prune time filters.
-- Stamp precedence for each request (docs/METRICS.md): token events, then vLLM phase child
-- spans, then gen_ai.latency.* attributes, then the span's own start / end.

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

CREATE OR REPLACE TEMP TABLE _req AS
SELECT
    _span,
    trace_id,
    span_id,
    coalesce(a_request_id, a_response_id, span_id) AS request_id,
    CASE kind WHEN 'CLIENT' THEN 'client' ELSE 'server' END AS view
FROM _kept
WHERE is_request;

-- Intervals given by child spans: tokenize, and vLLM's newer queue / prefill / decode spans.
CREATE OR REPLACE TEMP VIEW _children AS
SELECT
    trace_id,
    parent_id AS span_id,
    max(t_end) FILTER (WHERE role = 'tokenize') AS tokenize_end,
    min(t_start) FILTER (WHERE role = 'queue') AS queue_start,
    max(t_end) FILTER (WHERE role = 'queue') AS queue_end,
    min(t_start) FILTER (WHERE role = 'prefill') AS prefill_start,
    max(t_end) FILTER (WHERE role = 'prefill') AS prefill_end,
    min(t_start) FILTER (WHERE role = 'decode') AS decode_start,
    max(t_end) FILTER (WHERE role = 'decode') AS decode_end,
    count(*) FILTER (WHERE role IN ('queue', 'prefill', 'decode')) AS phase_spans,
    count(*) FILTER (WHERE a_preempted = 'true') AS preempted_spans
FROM _kept
WHERE role IS NOT NULL AND parent_id IS NOT NULL
GROUP BY ALL;

CREATE OR REPLACE TEMP VIEW otel_requests AS
SELECT
    r.request_id,
    r.view,
    s.instance,
    coalesce(s.a_response_model, s.a_request_model) AS model,
    s.t_start AS t_arrival,
    c.tokenize_end AS t_tokenized,
    coalesce(
        s.tok_first, c.prefill_end, c.decode_start, s.t_start + _sec_ns(s.a_ttft_s)
    ) AS t_first_token,
    coalesce(
        s.tok_last,
        c.decode_end,
        s.t_start + _sec_ns(s.a_e2e_s),
        t_first_token + _sec_ns(s.a_decode_s),
        s.t_end
    ) AS t_last_token,
    coalesce(
        c.queue_end,
        c.prefill_start,
        t_first_token - _sec_ns(s.a_prefill_s),
        coalesce(c.tokenize_end, s.t_start) + _sec_ns(s.a_queue_s)
    ) AS t_scheduled,
    coalesce(c.queue_start, t_scheduled - _sec_ns(s.a_queue_s), c.tokenize_end) AS t_queued,
    _int(coalesce(s.a_prompt_tokens, s.a_input_tokens)) AS prompt_tokens,
    coalesce(_int(coalesce(s.a_completion_tokens, s.a_output_tokens)), s.tok_count)
        AS output_tokens,
    _int(coalesce(s.a_cached_tokens, s.a_cache_read_tokens)) AS cached_tokens,
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
    CASE WHEN c.phase_spans > 0 THEN c.preempted_spans END AS n_preemptions,
    s.tok_chunks IS NOT NULL AS streaming,
    1 AS time_resolution_ns
FROM _kept AS s
JOIN _req AS r USING (_span)
LEFT JOIN _children AS c ON c.trace_id = s.trace_id AND c.span_id = s.span_id
ORDER BY t_arrival, r.request_id;

-- gap_ns (TBT) was computed per request span in the first pass (traceq/ingest/otel/spans.py).
CREATE OR REPLACE TEMP VIEW otel_tokens AS
SELECT r.request_id, t.idx, t.ts, t.n_tokens, r.view, t.gap_ns
FROM stage_tokens AS t
JOIN _req AS r USING (_span);

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
    coalesce(r.request_id, p.request_id) AS request_id
FROM _kept AS k
LEFT JOIN _req AS r ON r._span = k._span
LEFT JOIN _req AS p ON p.trace_id = k.trace_id AND p.span_id = k.parent_id;

CREATE OR REPLACE TEMP VIEW otel_events AS
SELECT
    e.ts,
    k.instance,
    e.kind,
    'INFO' AS severity,
    coalesce(r.request_id, p.request_id) AS request_id,
    e.message
FROM stage_events AS e
JOIN _kept AS k USING (_span)
LEFT JOIN _req AS r ON r._span = k._span
LEFT JOIN _req AS p ON p.trace_id = k.trace_id AND p.span_id = k.parent_id;
