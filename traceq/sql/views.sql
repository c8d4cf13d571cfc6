-- Public views over a dataset. Metric definitions: docs/METRICS.md (SPEC §4).
-- Every view has a comment above it and every column a comment above its expression;
-- tests/test_docs.py renders and checks them (docs/VIEWS.md).

-- @view request_phases
-- One row per request: its latency split into tokenize, queue, prefill, decode and an
-- explicit residual. Where a request has both a server and a client row, the server row is
-- used (SPEC §4), and of several rows of one view the one with the finest stamps (a span beats
-- a log line); the requests table keeps them all. Durations are *_ns (BIGINT) and *_ms (DOUBLE).
CREATE OR REPLACE VIEW request_phases AS
WITH picked AS (
    SELECT *
    FROM requests
    QUALIFY row_number() OVER (
        PARTITION BY request_id
        ORDER BY (view = 'server') DESC, time_resolution_ns ASC NULLS LAST, t_arrival, source_id
    ) = 1
),
durations AS (
    SELECT
        *,
        coalesce(t_tokenized, t_queued) - t_arrival AS tokenize_ns,
        t_scheduled - t_queued AS queue_ns,
        t_first_token - t_scheduled AS prefill_ns,
        t_last_token - t_first_token AS decode_ns,
        t_kv_transfer_end - t_kv_transfer_start AS kv_transfer_ns,
        t_first_token - t_arrival AS ttft_ns,
        t_last_token - t_arrival AS e2e_ns
    FROM picked
)
SELECT
    -- Request id as the producer printed it.
    request_id,
    -- Source file the row came from (manifest source_id).
    source_id,
    -- server or client.
    view,
    -- Serving instance.
    instance,
    -- Model name, when known.
    model,
    -- Arrival time, ns since the Unix epoch (UTC).
    t_arrival,
    -- Tokenization: tokenize span, else t_queued - t_arrival (ns).
    tokenize_ns,
    -- Waiting in the scheduler queue: t_scheduled - t_queued (ns).
    queue_ns,
    -- Prefill: t_first_token - t_scheduled (ns).
    prefill_ns,
    -- Decode: t_last_token - t_first_token (ns).
    decode_ns,
    -- Disaggregated serving: KV-cache transfer to this server; null elsewhere (ns).
    kv_transfer_ns,
    -- e2e minus the known phases: time no stamp explains, e.g. API server or network (ns).
    e2e_ns - (
        coalesce(tokenize_ns, 0) + coalesce(queue_ns, 0) + coalesce(prefill_ns, 0)
        + coalesce(decode_ns, 0) + coalesce(kv_transfer_ns, 0)
    ) AS residual_ns,
    -- Time to first token, from arrival, so including tokenization and queueing (ns).
    ttft_ns,
    -- End to end: t_last_token - t_arrival (ns).
    e2e_ns,
    -- Time per output token: decode / (output_tokens - 1); null for <= 1 output token (ns).
    CASE WHEN output_tokens > 1 THEN decode_ns / (output_tokens - 1) END AS tpot_ns,
    -- tokenize_ns in milliseconds.
    tokenize_ns / 1e6 AS tokenize_ms,
    -- queue_ns in milliseconds.
    queue_ns / 1e6 AS queue_ms,
    -- prefill_ns in milliseconds.
    prefill_ns / 1e6 AS prefill_ms,
    -- decode_ns in milliseconds.
    decode_ns / 1e6 AS decode_ms,
    -- residual_ns in milliseconds.
    residual_ns / 1e6 AS residual_ms,
    -- ttft_ns in milliseconds.
    ttft_ns / 1e6 AS ttft_ms,
    -- tpot_ns in milliseconds.
    tpot_ns / 1e6 AS tpot_ms,
    -- e2e_ns in milliseconds.
    e2e_ns / 1e6 AS e2e_ms,
    -- Prompt tokens.
    prompt_tokens,
    -- Output tokens.
    output_tokens,
    -- Prompt tokens served from the prefix cache.
    cached_tokens,
    -- Finish reason (stop, length, abort, ...).
    finish_reason,
    -- Error type or message; null on success.
    error
FROM durations;

-- @view token_gaps
-- One row per streamed chunk with the gap since the previous chunk of the same request
-- (TBT / inter-chunk latency). The first chunk of a request has a null gap.
CREATE OR REPLACE VIEW token_gaps AS
SELECT
    -- Request id (requests.request_id).
    request_id,
    -- Source file the row came from.
    source_id,
    -- 0-based chunk position in the request.
    idx,
    -- Chunk time, ns since the Unix epoch (UTC).
    ts,
    -- Tokens in the chunk.
    n_tokens,
    -- Gap since the previous chunk (ns).
    ts - lag(ts) OVER w AS tbt_ns,
    -- Gap since the previous chunk (ms).
    (ts - lag(ts) OVER w) / 1e6 AS tbt_ms
FROM tokens
WINDOW w AS (PARTITION BY source_id, request_id ORDER BY idx);

-- @view kpi_latency
-- Latency KPIs, one row per metric: count, mean and linearly interpolated percentiles
-- (quantile_cont). tbt_ms pools every chunk gap of every request (vLLM bench's "ITL").
CREATE OR REPLACE VIEW kpi_latency AS
WITH samples AS (
    SELECT 1 AS ord, 'ttft_ms' AS metric, ttft_ms AS v FROM request_phases
    UNION ALL
    SELECT 2, 'tpot_ms', tpot_ms FROM request_phases
    UNION ALL
    SELECT 3, 'tbt_ms', tbt_ms FROM token_gaps
    UNION ALL
    SELECT 4, 'e2e_ms', e2e_ms FROM request_phases
    UNION ALL
    SELECT 5, 'tokenize_ms', tokenize_ms FROM request_phases
    UNION ALL
    SELECT 6, 'queue_ms', queue_ms FROM request_phases
    UNION ALL
    SELECT 7, 'prefill_ms', prefill_ms FROM request_phases
    UNION ALL
    SELECT 8, 'decode_ms', decode_ms FROM request_phases
    UNION ALL
    SELECT 9, 'residual_ms', residual_ms FROM request_phases
)
SELECT
    -- Metric name (a request_phases / token_gaps column, in ms).
    metric,
    -- Number of non-null samples.
    count(v) AS n,
    -- Mean (ms).
    avg(v) AS mean,
    -- Median (ms).
    quantile_cont(v, 0.5) AS p50,
    -- 90th percentile (ms).
    quantile_cont(v, 0.9) AS p90,
    -- 95th percentile (ms).
    quantile_cont(v, 0.95) AS p95,
    -- 99th percentile (ms).
    quantile_cont(v, 0.99) AS p99,
    -- Maximum (ms).
    max(v) AS max
FROM samples
GROUP BY ord, metric
ORDER BY ord;

-- @view kpi_throughput
-- Throughput KPIs over the whole dataset, one row. The window runs from the first arrival to
-- the last token of request_phases.
CREATE OR REPLACE VIEW kpi_throughput AS
SELECT
    -- Requests (request_phases rows).
    count(*) AS requests,
    -- Requests with an error.
    count(error) AS errors,
    -- Window length: last token - first arrival (s).
    (max(t_arrival + e2e_ns) - min(t_arrival)) / 1e9 AS duration_s,
    -- Requests per second over the window.
    count(*) / nullif(duration_s, 0) AS requests_per_s,
    -- Output tokens per second over the window.
    sum(output_tokens) / nullif(duration_s, 0) AS output_tokens_per_s,
    -- Prompt tokens per second over the window.
    sum(prompt_tokens) / nullif(duration_s, 0) AS prompt_tokens_per_s,
    -- Share of all e2e time that no phase explains: sum(residual) / sum(e2e).
    sum(residual_ns) / nullif(sum(e2e_ns), 0) AS residual_share
FROM request_phases;
