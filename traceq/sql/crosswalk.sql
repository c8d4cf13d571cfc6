-- The metric-dialect crosswalk: each load-test tool's own latency figures (tool_metrics) next
-- to our statistics recomputed from the same run's client rows. Definitions: docs/METRICS.md,
-- section "Crosswalk to load-test tools". Every view has a comment above it and every column
-- a comment above its expression.

-- @view crosswalk
-- One row per native latency figure of an imported load-test run (tool, metric, statistic) with
-- our statistic of the matching metric (docs/METRICS.md definitions) from that run's client
-- requests: successful requests only, linear-interpolated percentiles (quantile_cont, numpy's
-- default), population std. Rows of summary-only files whose per-request file was not ingested
-- have a null ours_ms. same_definition says whether the two figures are meant to agree.
CREATE OR REPLACE VIEW crosswalk AS
WITH native_map (tool, native_metric, our_metric, same_definition, native_definition) AS (
    VALUES
    ('vllm-bench', 'ttft', 'ttft_ms', true, 'first content chunk - request send (client)'),
    ('vllm-bench', 'tpot', 'tpot_ms', true,
        '(latency - ttft) / (output_len - 1) per request; requests with output_len <= 1 excluded'),
    ('vllm-bench', 'itl', 'tbt_ms', true, 'every gap between streamed chunks, pooled over requests'),
    ('vllm-bench', 'e2el', 'e2e_ms', true, 'last chunk - request send'),
    ('genai-perf', 'time_to_first_token', 'ttft_ms', true,
        'first response with content - request timestamp'),
    ('genai-perf', 'time to first token', 'ttft_ms', true,
        'first response with content - request timestamp'),
    ('genai-perf', 'inter_token_latency', 'tpot_ms', true,
        '(request_latency - ttft) / (OSL - 1) per request; OSL from re-tokenizing the output'),
    ('genai-perf', 'inter token latency', 'tpot_ms', true,
        '(request_latency - ttft) / (OSL - 1) per request; OSL from re-tokenizing the output'),
    ('genai-perf', 'request_latency', 'e2e_ms', true, 'last response with content - request timestamp'),
    ('genai-perf', 'request latency', 'e2e_ms', true, 'last response with content - request timestamp'),
    ('aiperf', 'ttft', 'ttft_ms', true, 'first content response - request start'),
    ('aiperf', 'time_to_first_token', 'ttft_ms', true, 'first content response - request start'),
    ('aiperf', 'time to first token', 'ttft_ms', true, 'first content response - request start'),
    ('aiperf', 'inter_token_latency', 'tpot_ms', true,
        '(request_latency - ttft) / (OSL - 1) per request; OSL counts reasoning tokens'),
    ('aiperf', 'inter token latency', 'tpot_ms', true,
        '(request_latency - ttft) / (OSL - 1) per request; OSL counts reasoning tokens'),
    ('aiperf', 'inter_chunk_latency', 'tbt_ms', true, 'every gap between content chunks, pooled'),
    ('aiperf', 'inter chunk latency', 'tbt_ms', true, 'every gap between content chunks, pooled'),
    ('aiperf', 'request_latency', 'e2e_ms', true, 'last content response - request start'),
    ('aiperf', 'request latency', 'e2e_ms', true, 'last content response - request start'),
    ('inference-perf', 'successes.latency.time_to_first_token', 'ttft_ms', true,
        'first output token time - request start'),
    ('inference-perf', 'successes.latency.time_per_output_token', 'tpot_ms', true,
        '(last token time - first token time) / (output_tokens - 1) per request'),
    ('inference-perf', 'successes.latency.inter_token_latency', 'tbt_ms', true,
        'every gap between consecutive token times, pooled (a multi-token chunk adds 0 s gaps)'),
    ('inference-perf', 'successes.latency.request_latency', 'e2e_ms', false,
        'end_time - start_time: the response fully read, after the last token'),
    ('inference-perf', 'successes.latency.normalized_time_per_output_token', 'e2e_per_token_ms',
        false, 'request_latency / output_tokens (NTPOT); request_latency ends after the last token'),
    ('guidellm', 'time_to_first_token_ms', 'ttft_ms', true,
        'first token iteration - request start; guidellm percentiles are not interpolated'),
    ('guidellm', 'inter_token_latency_ms', 'tpot_ms', false,
        '(last - first token) / (output_tokens - 1), distribution weighted by tokens'),
    ('guidellm', 'time_per_output_token_ms', 'e2e_per_token_ms', false,
        '(last token - request start) / output_tokens: includes TTFT; weighted by tokens'),
    ('guidellm', 'request_latency', 'e2e_ms', false,
        'request_end - request_start: the response fully read, after the last token'),
    ('llmperf', 'ttft_s', 'ttft_ms', true, 'first token - request send; its std is the sample std'),
    ('llmperf', 'end_to_end_latency_s', 'e2e_ms', true, 'last token - request send; its std is the sample std'),
    ('llmperf', 'inter_token_latency_s', 'e2e_per_token_ms', false,
        'sum of all chunk gaps including TTFT / output tokens: about e2e / output tokens, but its '
        'gaps end at the last token and its e2e when the stream closes; std is the sample std')
),
our_definitions (our_metric, our_definition) AS (
    VALUES
    ('ttft_ms', 't_first_token - t_arrival'),
    ('tpot_ms', '(t_last_token - t_first_token) / (output_tokens - 1), output_tokens > 1'),
    ('tbt_ms', 'gap between consecutive chunks of a request (tokens.gap_ns), pooled'),
    ('e2e_ms', 't_last_token - t_arrival'),
    ('e2e_per_token_ms', '(t_last_token - t_arrival) / output_tokens, output_tokens > 0')
),
stat_names (names) AS (
    SELECT ['p0.1', 'p1', 'p5', 'p10', 'p25', 'p50', 'p75', 'p90', 'p95', 'p99', 'p99.9']
),
ok AS (
    SELECT * FROM requests WHERE view = 'client' AND error IS NULL
),
samples AS (
    SELECT source_id, run, 'ttft_ms' AS metric, (t_first_token - t_arrival) / 1e6 AS v FROM ok
    UNION ALL
    SELECT source_id, run, 'tpot_ms',
        (t_last_token - t_first_token) / (output_tokens - 1) / 1e6
    FROM ok WHERE output_tokens > 1
    UNION ALL
    SELECT source_id, run, 'e2e_ms', (t_last_token - t_arrival) / 1e6 FROM ok
    UNION ALL
    SELECT source_id, run, 'e2e_per_token_ms', (t_last_token - t_arrival) / output_tokens / 1e6
    FROM ok WHERE output_tokens > 0
    UNION ALL
    -- Each file's own chunks (tokens.gap_ns), copies included: the tool's figures describe
    -- that file, whatever other sources carry the same requests.
    SELECT t.source_id, ok.run, 'tbt_ms', t.gap_ns / 1e6
    FROM tokens AS t JOIN ok USING (source_id, request_id, view)
),
scoped AS (
    SELECT source_id, run, metric, v FROM samples WHERE run IS NOT NULL
    UNION ALL
    SELECT source_id, NULL, metric, v FROM samples
),
ours AS (
    SELECT
        source_id, run, metric,
        count(v) AS n,
        avg(v) AS mean,
        stddev_pop(v) AS std,
        min(v) AS min,
        max(v) AS max,
        quantile_cont(v, [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999]) AS q
    FROM scoped
    WHERE v IS NOT NULL
    GROUP BY source_id, run, metric
),
native AS (
    SELECT
        t.*,
        m.our_metric,
        m.same_definition,
        m.native_definition,
        t.value * CASE lower(t.unit)
            WHEN 'ms' THEN 1.0 WHEN 's' THEN 1000.0 WHEN 'sec' THEN 1000.0
            WHEN 'us' THEN 0.001 WHEN 'ns' THEN 0.000001 END AS native_ms
    FROM tool_metrics AS t
    JOIN native_map AS m ON m.tool = t.tool AND m.native_metric = lower(t.metric)
)
SELECT
    -- Source of the per-request rows the figure is compared with (tool_metrics.run_source_id).
    n.run_source_id AS run_source_id,
    -- Source the tool's figure came from (the summary file, or the per-request file itself).
    n.source_id AS summary_source_id,
    -- Tool that reported the figure.
    n.tool AS tool,
    -- Run within the source (requests.run); null for the whole file.
    n.run AS run,
    -- The tool's own metric name, as the tool spells it.
    n.metric AS native_metric,
    -- Statistic (mean, p50, p99, std, min, max, ...).
    n.statistic AS statistic,
    -- The tool's value in its own unit.
    n.value AS native_value,
    -- The tool's unit.
    n.unit AS native_unit,
    -- The tool's value in milliseconds.
    n.native_ms AS native_ms,
    -- Our metric with the matching meaning (ttft_ms, tpot_ms, tbt_ms, e2e_ms, e2e_per_token_ms).
    n.our_metric AS our_metric,
    -- Our statistic of that metric over the run's successful client requests (ms).
    CASE n.statistic
        WHEN 'mean' THEN o.mean
        WHEN 'std' THEN o.std
        WHEN 'min' THEN o.min
        WHEN 'max' THEN o.max
        ELSE o.q[list_position(s.names, n.statistic)]
    END AS ours_ms,
    -- native_ms - ours_ms.
    n.native_ms - ours_ms AS diff_ms,
    -- Samples behind our statistic (requests, or chunk gaps for tbt_ms).
    o.n AS our_samples,
    -- True where the tool defines the figure as we do, so the two should agree to rounding.
    n.same_definition AS same_definition,
    -- What the tool's metric measures.
    n.native_definition AS native_definition,
    -- What our metric measures (docs/METRICS.md).
    d.our_definition AS our_definition
FROM native AS n
CROSS JOIN stat_names AS s
JOIN our_definitions AS d ON d.our_metric = n.our_metric
LEFT JOIN ours AS o
    ON o.source_id = n.run_source_id
    AND o.run IS NOT DISTINCT FROM n.run
    AND o.metric = n.our_metric
WHERE n.statistic IN ('mean', 'std', 'min', 'max') OR list_contains(s.names, n.statistic)
ORDER BY n.run_source_id, n.tool, n.run, n.our_metric, n.metric, n.statistic;
