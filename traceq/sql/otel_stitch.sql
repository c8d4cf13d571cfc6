-- Second pass of the OpenTelemetry ingest, part 3: the traces that cross processes
-- (_hop_traces, otel_finalize.sql), their engines and the role of each. otel_clocks.sql then
-- estimates each instance's clock offset and otel_stitched.sql builds one request per trace.
-- Every table here holds the spans of those traces only: for a file of single-engine traces
-- _hop_traces is empty and each statement joins against nothing.
-- Span names and attributes per producer: traceq/ingest/otel/hops.py; docs/INGEST.md "One
-- request across every hop".

-- The spans of the traces to stitch, each with its parent's instance, times and kind.
CREATE OR REPLACE TEMP TABLE _ts AS
WITH t AS (
    SELECT
        _span, trace_id, span_id, parent_id, instance, name, kind, hop, is_request, t_start,
        t_end, status_code, status_message, a_error_type, a_disagg_role, a_route_phase,
        a_x_request_id, a_dynamo_request_id, a_plain_request_id, a_request_id, a_max_tokens,
        a_ttft_ms, a_plain_input_tokens, a_plain_output_tokens, a_plain_model, a_worker_id,
        a_overlap_blocks, a_prefill_target, a_decode_target
    FROM _kept
    SEMI JOIN _hop_traces USING (trace_id)
)
SELECT
    c.*,
    p.instance AS p_instance,
    p.t_start AS p_start,
    p.t_end AS p_end,
    p.kind AS p_kind,
    p.name AS p_name,
    p.a_disagg_role AS p_role,
    c.kind = 'CLIENT' AND p.span_id IS NULL AS is_client_root,
    CASE
        WHEN c.status_code = 'ERROR'
            THEN coalesce(c.a_error_type, nullif(c.status_message, ''), 'ERROR')
        ELSE c.a_error_type
    END AS span_error
FROM t AS c
LEFT JOIN t AS p ON p.trace_id = c.trace_id AND p.span_id = c.parent_id;

-- Engines: vLLM's llm_request (under Dynamo's engine.generate when Dynamo hands vLLM the
-- trace context, which gives it the role), and Dynamo's engine.generate where no llm_request
-- lies under it.
CREATE OR REPLACE TEMP TABLE _engines AS
WITH vllm AS (
    SELECT *, CASE WHEN p_name = 'engine.generate' THEN p_role END AS role_attr
    FROM _ts
    WHERE is_request AND name = 'llm_request' AND kind IS DISTINCT FROM 'CLIENT'
)
SELECT * FROM vllm
UNION ALL BY NAME
SELECT g.*, g.a_disagg_role AS role_attr
FROM _ts AS g
ANTI JOIN vllm AS v ON v.trace_id = g.trace_id AND v.parent_id = g.span_id
WHERE g.hop = 'engine';

-- The request rows (otel_stamps.sql) of those engines: a semi join built on the few engines.
CREATE OR REPLACE TEMP TABLE _engine_rows AS
SELECT r.* FROM _engine_requests AS r SEMI JOIN _engines AS e USING (_span);

-- Each engine's stamps on its own clock. Dynamo's engine.generate alone gives its arrival,
-- ttft_ms and end: no queue split, so its prefill includes queueing (t_scheduled = arrival).
CREATE OR REPLACE TEMP TABLE _engine_stamps AS
SELECT
    e._span,
    e.trace_id,
    e.span_id,
    e.name,
    e.instance,
    e.t_start,
    e.t_end,
    lower(e.role_attr) AS role_attr,
    e.a_max_tokens,
    r.request_id,
    coalesce(r.t_arrival, e.t_start) AS t_arrival,
    r.t_tokenized,
    r.t_queued,
    CASE WHEN r._span IS NULL THEN e.t_start ELSE r.t_scheduled END AS t_scheduled,
    coalesce(
        r.t_first_token, e.t_start + CAST(round(TRY_CAST(e.a_ttft_ms AS DOUBLE) * 1e6) AS BIGINT)
    ) AS t_first_token,
    coalesce(r.t_last_token, CASE WHEN r._span IS NULL THEN e.t_end END) AS t_last_token,
    r.t_kv_transfer_start,
    r.t_kv_transfer_end,
    coalesce(r.prompt_tokens, _int(e.a_plain_input_tokens)) AS prompt_tokens,
    coalesce(r.output_tokens, _int(e.a_plain_output_tokens)) AS output_tokens,
    r.cached_tokens,
    coalesce(r.max_tokens, _int(e.a_max_tokens)) AS max_tokens,
    coalesce(r.model, e.a_plain_model) AS model,
    r.finish_reason,
    coalesce(r.error, e.span_error) AS error,
    r.n_preemptions,
    r.streaming
FROM _engines AS e
LEFT JOIN _engine_rows AS r USING (_span);

-- Per trace: the sidecar's calls to the prefill and the decode engine (llm-d), and the ids
-- the layers gave the request.
CREATE OR REPLACE TEMP TABLE _trace_facts AS
SELECT
    trace_id,
    min(t_start) FILTER (WHERE name = 'llm_d.pd_proxy.prefill') AS pp_start,
    min(t_start) FILTER (WHERE name = 'llm_d.pd_proxy.decode') AS pd_start,
    count(*) FILTER (WHERE name = 'llm_d.pd_proxy.prefill') AS pp_count,
    count(*) FILTER (WHERE name = 'llm_d.pd_proxy.decode') AS pd_count,
    any_value(a_x_request_id) AS x_request_id,
    any_value(CASE WHEN hop IN ('gateway', 'router', 'detail') THEN a_request_id END)
        AS gateway_id,
    any_value(coalesce(a_dynamo_request_id, CASE WHEN hop = 'router' THEN a_plain_request_id END))
        AS dynamo_id,
    any_value(CASE WHEN is_client_root THEN a_request_id END) AS client_id
FROM _ts
GROUP BY trace_id;

-- Prefill or decode, by the first signal present (docs/INGEST.md): Dynamo's disagg_role; one
-- engine asking for a single token (max_tokens = 1, as llm-d's sidecar and Dynamo's prefill
-- handler send) beside one asking for more; the llm-d sidecar's prefill / decode call spans
-- (the engine whose start lies nearest each call's start; where the sidecar called only the
-- prefill, as when the prefill failed, its engines are the prefill). Else one engine served
-- it alone.
CREATE OR REPLACE TEMP TABLE _roles AS
WITH n AS (
    SELECT
        trace_id,
        count(*) AS engines,
        count(*) FILTER (WHERE a_max_tokens = '1') AS singles
    FROM _engine_stamps
    GROUP BY trace_id
),
signal AS (
    SELECT
        e.*,
        f.pp_count,
        f.pd_count,
        CASE
            WHEN e.role_attr IN ('prefill', 'decode', 'agg') THEN 'disagg_role'
            WHEN n.singles BETWEEN 1 AND n.engines - 1 THEN 'max_tokens'
            WHEN f.pp_count > 0 THEN 'sidecar'
        END AS signal,
        CASE
            WHEN e.role_attr IN ('prefill', 'decode', 'agg') THEN e.role_attr
            WHEN n.singles BETWEEN 1 AND n.engines - 1
                THEN CASE WHEN e.a_max_tokens = '1' THEN 'prefill' ELSE 'decode' END
            WHEN f.pp_count > 0
                THEN CASE
                    WHEN f.pd_count = 0 THEN 'prefill'
                    WHEN abs(e.t_start - f.pp_start) < abs(e.t_start - f.pd_start) THEN 'prefill'
                    ELSE 'decode'
                END
            ELSE 'agg'
        END AS role
    FROM _engine_stamps AS e
    JOIN n USING (trace_id)
    LEFT JOIN _trace_facts AS f USING (trace_id)
)
-- Of several engines in one role (a retry, a migration), the one that produced the response:
-- it has tokens, then no error, then it ended last. A window per trace, a few rows each.
SELECT
    *,
    row_number() OVER (
        PARTITION BY trace_id, role = 'prefill'
        ORDER BY
            (t_first_token IS NOT NULL OR coalesce(output_tokens, 0) > 0) DESC,
            (error IS NULL) DESC,
            t_end DESC,
            _span
    ) = 1 AS served
FROM signal;

-- The first hop of each trace: its gateway (Dynamo frontend, llm-d EPP), else its router,
-- else the sidecar; the earliest of them.
CREATE OR REPLACE TEMP TABLE _first_hop AS
SELECT * EXCLUDE (k)
FROM (
    SELECT
        trace_id, _span, span_id, instance, name, hop, t_start, t_end,
        row_number() OVER (
            PARTITION BY trace_id
            ORDER BY CASE hop WHEN 'gateway' THEN 1 WHEN 'router' THEN 2 ELSE 3 END, t_start, _span
        ) AS k
    FROM _ts
    WHERE hop IN ('gateway', 'router', 'proxy')
)
WHERE k = 1;
