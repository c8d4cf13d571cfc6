-- Public views over a dataset. Metric definitions: docs/METRICS.md.
-- Every view has a comment above it and every column a comment above its expression;
-- tests/test_docs.py renders and checks them (docs/VIEWS.md).
--
-- Which row stands for each request was settled when the sources were committed
-- (traceq/pick.py, request_pick.sql): _request_pick holds one row per request id and view,
-- is_primary marks the one that stands for the request. traceq/db.py registers the tokens
-- of the sources that lend all their rows (_tokens_primary_all, _tokens_client_all) apart
-- from those that lend only some (_tokens_primary_some, _tokens_client_some), so only the
-- latter are joined to the pick. No view ranks rows or runs a window per query.

-- Exact percentiles in bounded memory. DuckDB's quantile_cont keeps every sample of a group in
-- a growing array outside its memory limit (about 17 bytes a sample: 0.93 GB for the 56 M TBT
-- gaps of 1 M requests, ~140 MB for kpi_latency's eight request columns at 1 M requests), so
-- _tbt_stats (TBT) and _request_stats (the request columns) find the same order statistics
-- in two passes:
-- 1. a histogram of the gaps over order-keeping buckets (count, min, max per bucket), which
--    places each wanted rank in one bucket;
-- 2. the distinct values of only those buckets (none when a bucket holds one distinct value),
--    each with its count, which place each rank on one value. Memory is that of the distinct
--    values of those buckets: at most 64 per bucket below 1 ms and 65 536 below 1.07 s
--    (bucket widths in ns), whatever the number of gaps (a few % of the gaps can sit in one
--    bucket: 2.2 M of 56 M gaps in bench/scale.py's 1 M-request run, 14 k distinct values).
-- Then it interpolates between the two ranks with quantile_cont's formula for doubles
-- (lo * (1 - d) + hi * d, with RN = (n - 1) * q and d = RN - floor(RN)), on the same doubles
-- (gap_ns / 1e6 keeps the order of gap_ns): the same order statistics as quantile_cont, and
-- the same percentile to the last bit or one unit in it (DuckDB's build may fuse the multiply
-- and the add, which SQL cannot; tests/test_views_pick.py).

-- Tokens of the rows that stand for their requests (request_phases), each chunk once.
CREATE OR REPLACE VIEW _primary_tokens AS
SELECT * FROM _tokens_primary_all
UNION ALL
SELECT t.*
FROM _tokens_primary_some AS t
SEMI JOIN _request_pick AS p
    ON p.is_primary
    AND p.source_id = t.source_id
    AND p.request_id = t.request_id
    AND p.view = t.view;

-- Tokens of each request's client row, each chunk once.
CREATE OR REPLACE VIEW _client_tokens AS
SELECT * FROM _tokens_client_all WHERE view = 'client'
UNION ALL
SELECT t.*
FROM _tokens_client_some AS t
SEMI JOIN _request_pick AS p
    ON p.view = 'client'
    AND t.view = 'client'
    AND p.source_id = t.source_id
    AND p.request_id = t.request_id;

-- The gaps of token_gaps (ns, nulls left out), each with its order-keeping bucket: gaps below
-- zero (chunks out of time order) mirror those above, below every bucket of a gap >= 0.
CREATE OR REPLACE VIEW _tbt_buckets AS
SELECT x, CASE WHEN x < 0 THEN -1 - _gap_bucket(-x) ELSE _gap_bucket(x) END AS b
FROM (SELECT gap_ns AS x FROM _primary_tokens WHERE gap_ns IS NOT NULL);

-- The gaps of _tbt_buckets whose source has no stored gap_buckets to stand for them: the
-- sources whose every chunk token_gaps reads but which have no rollups (traceq/db.py,
-- token_views), and those whose chunks are picked request by request.
CREATE OR REPLACE VIEW _tbt_buckets_unrolled AS
SELECT x, CASE WHEN x < 0 THEN -1 - _gap_bucket(-x) ELSE _gap_bucket(x) END AS b
FROM (
    SELECT gap_ns AS x FROM _tokens_primary_all_unrolled WHERE gap_ns IS NOT NULL
    UNION ALL
    SELECT t.gap_ns
    FROM _tokens_primary_some AS t
    SEMI JOIN _request_pick AS p
        ON p.is_primary
        AND p.source_id = t.source_id
        AND p.request_id = t.request_id
        AND p.view = t.view
    WHERE t.gap_ns IS NOT NULL
);

-- TBT over token_gaps (n, mean, the four percentiles, max), the percentiles exact in bounded
-- memory (_gap_bucket: traceq/sql/gap_bucket.sql). The histogram sums the bucket counts
-- written at ingest (gap_buckets, of the sources whose every chunk token_gaps reads) with
-- those of the other gaps (_tbt_buckets_unrolled); counts, minima, maxima and integer sums
-- add exactly, so it is the histogram of every gap. Only the buckets that hold a wanted rank
-- are then read from every chunk (_tbt_buckets, a view, not a CTE, so that its rows are
-- streamed, never held).
CREATE OR REPLACE VIEW _tbt_stats AS
WITH histogram AS MATERIALIZED (
    SELECT
        b, CAST(sum(c) AS BIGINT) AS c, min(lo) AS lo, max(hi) AS hi, sum(total_ns) AS total_ns
    FROM (
        SELECT bucket AS b, n AS c, lo_ns AS lo, hi_ns AS hi, sum_ns AS total_ns
        FROM _buckets_primary_all
        UNION ALL
        SELECT b, count(*) AS c, min(x) AS lo, max(x) AS hi, sum(x) AS total_ns
        FROM _tbt_buckets_unrolled
        GROUP BY b
    )
    GROUP BY b
),
-- the mean from the exact integer sum (avg over doubles differs from it in the last bits,
-- and from run to run with the order of summation)
total AS (
    SELECT
        CAST(coalesce(sum(c), 0) AS BIGINT) AS n,
        sum(total_ns) / sum(c) / 1e6 AS mean,
        max(hi) / 1e6 AS max
    FROM histogram
),
placed AS (
    SELECT b, c, lo, hi, CAST(sum(c) OVER (ORDER BY b) - c AS BIGINT) AS before
    FROM histogram
),
-- quantile_cont's interpolation: RN = (n - 1) * q between ranks floor(RN) and ceil(RN)
percentiles AS (
    SELECT p.k, p.q, CAST(t.n - 1 AS DOUBLE) * p.q AS rn
    FROM total AS t
    -- a VALUES list, not two parallel unnests: Spark allows one generator per SELECT
    CROSS JOIN (
        VALUES (1, CAST(0.5 AS DOUBLE)), (2, CAST(0.9 AS DOUBLE)), (3, CAST(0.95 AS DOUBLE)),
            (4, CAST(0.99 AS DOUBLE))
    ) AS p (k, q)
    WHERE t.n > 0
),
ranks AS (
    SELECT DISTINCT CAST(floor(rn) AS BIGINT) AS r FROM percentiles
    UNION
    SELECT CAST(ceil(rn) AS BIGINT) FROM percentiles
),
located AS (
    SELECT r.r, p.b, p.lo, p.hi, r.r - p.before AS i
    FROM ranks AS r
    JOIN placed AS p ON r.r >= p.before AND r.r < p.before + p.c
),
-- the distinct values of the buckets that hold a wanted rank and more than one distinct value,
-- each with its count (a hash semi join on the bucket: cheaper than filtering every row by
-- subquery results): at most one row per ns of a bucket's width, however many gaps it holds
opened AS (
    SELECT t.b, t.x, count(*) AS c
    FROM _tbt_buckets AS t
    SEMI JOIN located AS l ON l.b = t.b AND l.lo < l.hi
    GROUP BY t.b, t.x
),
-- each distinct value with the count of smaller ones in its bucket: it holds ranks below ..
-- below + c - 1 of the bucket
stacked AS (
    SELECT b, x, c, CAST(sum(c) OVER (PARTITION BY b ORDER BY x) - c AS BIGINT) AS below
    FROM opened
),
ranked AS (
    SELECT l.r, CASE WHEN l.lo = l.hi THEN l.lo ELSE o.x END / 1e6 AS v
    FROM located AS l
    LEFT JOIN stacked AS o ON o.b = l.b AND l.i >= o.below AND l.i < o.below + o.c
),
interpolated AS (
    SELECT
        p.k,
        CASE
            WHEN floor(p.rn) = ceil(p.rn) THEN lo.v
            ELSE lo.v * (1 - (p.rn - floor(p.rn))) + hi.v * (p.rn - floor(p.rn))
        END AS v
    FROM percentiles AS p
    JOIN ranked AS lo ON lo.r = CAST(floor(p.rn) AS BIGINT)
    JOIN ranked AS hi ON hi.r = CAST(ceil(p.rn) AS BIGINT)
)
SELECT {
    'n': t.n,
    'mean': t.mean,
    'q': (SELECT list(v ORDER BY k) FROM interpolated),
    'max': t.max
} AS s
FROM total AS t;

-- @view request_phases
-- One row per request: its latency split into tokenize, queue, prefill, decode and an
-- explicit residual. A routed or disaggregated request (one trace across gateway, router,
-- prefill worker, KV transfer, decode worker) is one row: t_arrival is its first hop's
-- arrival, queue_ms and prefill_ms are the prefill worker's, decode_queue_ms and decode_ms the
-- decode worker's, ttft_ms runs from the first hop to the decode engine's first token and
-- e2e_ms is the first hop's own span; stamps that cross hosts are on the reference clock
-- (clock_offsets). Where a request has both a server and a client row, the server row is
-- used (docs/METRICS.md), and of several rows of one view the one with the finest stamps (a
-- span beats a log line), then the earliest ingested; copies of a request from other sources (the same
-- request id and view) are counted once. The requests table keeps every row. Rows are in
-- arrival order. Durations are *_ns (BIGINT) and *_ms (DOUBLE).
CREATE OR REPLACE VIEW request_phases AS
WITH picked AS (
    SELECT * FROM _request_pick WHERE is_primary
),
durations AS (
    SELECT
        *,
        coalesce(t_tokenized, t_queued) - coalesce(t_engine_arrival, t_arrival) AS tokenize_ns,
        t_scheduled - t_queued AS queue_ns,
        coalesce(t_prefill_end, t_first_token) - t_scheduled AS prefill_ns,
        t_last_token - t_first_token AS decode_ns,
        t_kv_transfer_end - t_kv_transfer_start AS kv_transfer_ns,
        t_decode_scheduled - t_decode_queued AS decode_queue_ns,
        t_first_token - t_arrival AS ttft_ns,
        coalesce(t_done, t_last_token) - t_arrival AS e2e_ns,
        -- phases that lie between t_arrival and the end only on a request stitched across
        -- hops (on a single-engine request the routing happened before its arrival)
        CASE
            WHEN t_engine_arrival IS NOT NULL
                THEN coalesce(route_ns, 0) + coalesce(t_decode_scheduled - t_decode_queued, 0)
            ELSE 0
        END AS _hop_ns
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
    -- t_arrival as a timestamp (UTC, ns precision).
    make_timestamp_ns(t_arrival) AS arrival_at,
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
    -- e2e minus the known phases (route and decode queue too on a disaggregated request):
    -- time no stamp explains, e.g. API server, network or proxy hops (ns).
    e2e_ns - (
        coalesce(tokenize_ns, 0) + coalesce(queue_ns, 0) + coalesce(prefill_ns, 0)
        + coalesce(decode_ns, 0) + coalesce(kv_transfer_ns, 0)
    ) - _hop_ns AS residual_ns,
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
    error,
    -- Sources that carry this request with the same view (copies counted once).
    copies,
    -- Routing decisions, summed (Dynamo decides for prefill and for decode); on a
    -- single-engine request they precede t_arrival. Crosses hosts: on the reference clock (ns).
    route_ns,
    -- Disaggregated request: waiting on the decode engine once the KV cache arrived (ns).
    decode_queue_ns,
    -- route_ns in milliseconds.
    route_ns / 1e6 AS route_ms,
    -- decode_queue_ns in milliseconds.
    decode_queue_ns / 1e6 AS decode_queue_ms,
    -- kv_transfer_ns in milliseconds.
    kv_transfer_ns / 1e6 AS kv_transfer_ms,
    -- Disaggregated request: the instance that ran its prefill.
    prefill_instance,
    -- Disaggregated request: the instance whose decode produced the response.
    decode_instance,
    -- What told prefill from decode (disagg_role, max_tokens, sidecar); null on one engine.
    role_signal,
    -- OpenTelemetry trace id of the request's spans (request_hops, spans).
    trace_id
FROM durations;

-- @view token_gaps
-- One row per streamed chunk of the row that stands for each request (request_phases), with
-- the gap since the previous chunk of that row (TBT / inter-chunk latency), computed once at
-- ingest (tokens.gap_ns). The first chunk of a request has a null gap. A request's chunks
-- from other rows (its client row, copies from other sources) are not here: the client's own
-- gaps are in client_token_gaps.
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
    gap_ns AS tbt_ns,
    -- Gap since the previous chunk (ms).
    gap_ns / 1e6 AS tbt_ms,
    -- server or client: the view of the request row (request_phases.view).
    view,
    -- ts as a timestamp (UTC, ns precision).
    make_timestamp_ns(ts) AS ts_at
FROM _primary_tokens;

-- @view client_token_gaps
-- token_gaps as the client saw it: one row per chunk of each request's client row (a
-- load-test export or client spans), with the gap since its previous chunk. Set beside
-- token_gaps for the same request_id, it tells stalls the client alone saw (network, client
-- scheduling) from the server's.
CREATE OR REPLACE VIEW client_token_gaps AS
SELECT
    -- Request id (requests.request_id).
    request_id,
    -- Source file the client row came from.
    source_id,
    -- 0-based chunk position in the request.
    idx,
    -- Chunk arrival at the client, ns since the Unix epoch (UTC).
    ts,
    -- Tokens in the chunk.
    n_tokens,
    -- Gap since the previous chunk, as the client saw it (ns).
    gap_ns AS tbt_ns,
    -- Gap since the previous chunk, as the client saw it (ms).
    gap_ns / 1e6 AS tbt_ms,
    -- ts as a timestamp (UTC, ns precision).
    make_timestamp_ns(ts) AS ts_at
FROM _client_tokens;

-- Order-keeping bucket of a request latency a >= 0 (ns): 1,024 ns wide below 1 ms, then 1/64
-- to 1/1024 of the value wide (16 µs below 16.8 ms, 262 µs below 268 ms, 4.2 ms below 4.3 s,
-- 67 ms below 68.7 s, 1.07 s below 18 min, 17 s above), so that a bucket holds few requests'
-- values at any scale of latency while the histogram stays small (about 11 k buckets for the
-- eight columns of 100 k requests); a larger value never gets a smaller bucket.
CREATE OR REPLACE MACRO _latency_bucket(a) AS
    CASE
        WHEN a < 1048576 THEN a >> 10
        WHEN a < 16777216 THEN 1024 + (a >> 14)
        WHEN a < 268435456 THEN 2048 + (a >> 18)
        WHEN a < 4294967296 THEN 3072 + (a >> 22)
        WHEN a < 68719476736 THEN 4096 + (a >> 26)
        WHEN a < 1099511627776 THEN 5120 + (a >> 30)
        ELSE 6144 + (a >> 34)
    END;

-- Whole ns (capped) of a latency v >= 0 in ms, for _latency_bucket: v * 1e6 then floor keeps
-- the order of v (tpot_ms is not a whole number of ns, and needs not be).
CREATE OR REPLACE MACRO _ms_floor_ns(v) AS CAST(floor(least(v * 1e6, 4e18)) AS BIGINT);

-- kpi_latency's request columns, one row per (metric, request) with a value: k is the
-- metric's place in kpi_latency, x its value (ms) as request_phases gives it, b its
-- order-keeping bucket (values below zero, e.g. a residual, mirror those above, below every
-- bucket of a value >= 0).
CREATE OR REPLACE VIEW _request_values AS
SELECT k, x, CASE
        WHEN x < 0 THEN -1 - _latency_bucket(_ms_floor_ns(-x))
        ELSE _latency_bucket(_ms_floor_ns(x))
    END AS b
FROM (
    SELECT
        m.k,
        CASE m.k
            WHEN 1 THEN r.ttft_ms
            WHEN 2 THEN r.tpot_ms
            WHEN 4 THEN r.e2e_ms
            WHEN 5 THEN r.tokenize_ms
            WHEN 6 THEN r.queue_ms
            WHEN 7 THEN r.prefill_ms
            WHEN 8 THEN r.decode_ms
            WHEN 9 THEN r.residual_ms
        END AS x
    FROM request_phases AS r
    CROSS JOIN (VALUES (1), (2), (4), (5), (6), (7), (8), (9)) AS m (k)
)
WHERE x IS NOT NULL;

-- kpi_latency's request columns as _tbt_stats gives TBT: one row per metric k with values, its
-- count, mean, four percentiles (quantile_cont's, to the last bit or one unit in it) and max,
-- in memory that does not grow with the requests: the histogram, then the distinct values of
-- the buckets that hold a wanted rank. _request_values is read twice (a view, not a CTE).
CREATE OR REPLACE VIEW _request_stats AS
WITH histogram AS MATERIALIZED (
    SELECT k, b, count(*) AS c, min(x) AS lo, max(x) AS hi, sum(x) AS total
    FROM _request_values
    GROUP BY k, b
),
total AS (
    SELECT k, CAST(sum(c) AS BIGINT) AS n, sum(total) / sum(c) AS mean, max(hi) AS max
    FROM histogram
    GROUP BY k
),
placed AS (
    SELECT
        k, b, c, lo, hi, CAST(sum(c) OVER (PARTITION BY k ORDER BY b) - c AS BIGINT) AS before
    FROM histogram
),
percentiles AS (
    SELECT t.k, p.i, p.q, CAST(t.n - 1 AS DOUBLE) * p.q AS rn
    FROM total AS t
    CROSS JOIN (
        VALUES (1, CAST(0.5 AS DOUBLE)), (2, CAST(0.9 AS DOUBLE)), (3, CAST(0.95 AS DOUBLE)),
            (4, CAST(0.99 AS DOUBLE))
    ) AS p (i, q)
),
ranks AS (
    SELECT DISTINCT k, CAST(floor(rn) AS BIGINT) AS r FROM percentiles
    UNION
    SELECT k, CAST(ceil(rn) AS BIGINT) FROM percentiles
),
located AS (
    SELECT r.k, r.r, p.b, p.lo, p.hi, r.r - p.before AS i
    FROM ranks AS r
    JOIN placed AS p ON p.k = r.k AND r.r >= p.before AND r.r < p.before + p.c
),
opened AS (
    SELECT t.k, t.b, t.x, count(*) AS c
    FROM _request_values AS t
    SEMI JOIN located AS l ON l.k = t.k AND l.b = t.b AND l.lo < l.hi
    GROUP BY t.k, t.b, t.x
),
stacked AS (
    SELECT
        k, b, x, c, CAST(sum(c) OVER (PARTITION BY k, b ORDER BY x) - c AS BIGINT) AS below
    FROM opened
),
ranked AS (
    SELECT l.k, l.r, CASE WHEN l.lo = l.hi THEN l.lo ELSE o.x END AS v
    FROM located AS l
    LEFT JOIN stacked AS o
        ON o.k = l.k AND o.b = l.b AND l.i >= o.below AND l.i < o.below + o.c
),
interpolated AS (
    SELECT
        p.k,
        list(
            CASE
                WHEN floor(p.rn) = ceil(p.rn) THEN lo.v
                ELSE lo.v * (1 - (p.rn - floor(p.rn))) + hi.v * (p.rn - floor(p.rn))
            END
            ORDER BY p.i
        ) AS q
    FROM percentiles AS p
    JOIN ranked AS lo ON lo.k = p.k AND lo.r = CAST(floor(p.rn) AS BIGINT)
    JOIN ranked AS hi ON hi.k = p.k AND hi.r = CAST(ceil(p.rn) AS BIGINT)
    GROUP BY p.k
)
SELECT t.k, {'n': t.n, 'mean': t.mean, 'q': i.q, 'max': t.max} AS s
FROM total AS t
JOIN interpolated AS i ON i.k = t.k;

-- kpi_latency's figures, one row per metric k with values (s: n, mean, q, max), as computed from
-- the files. traceq/db.py puts in its place the same rows stored when the dataset was last
-- ingested (traceq/ingest/kpis.py), when they were stored for exactly these files and SQL.
CREATE OR REPLACE VIEW _kpi_stats AS
SELECT k, s FROM _request_stats
UNION ALL
SELECT 3, s FROM _tbt_stats;

-- @view kpi_latency
-- Latency KPIs, one row per metric: count, mean and linearly interpolated percentiles
-- (quantile_cont). tbt_ms pools every chunk gap of every request (vLLM bench's "ITL") from
-- token_gaps, so the same rows as request_phases. The percentiles are quantile_cont's (to the
-- last bit or one unit in it), found in memory that does not grow with the requests or the
-- chunks: a histogram, then only the values near each percentile (two scans of
-- request_phases; one of token_gaps, whose histogram is summed from the gap_buckets table
-- written at ingest where a source has it). A dataset of at least two million chunks stores the
-- figures when it is ingested, and this view reads them back while its files are unchanged.
CREATE OR REPLACE VIEW kpi_latency AS
SELECT
    -- Metric name (a request_phases / token_gaps column, in ms).
    m.metric,
    -- Number of non-null samples.
    coalesce(s.n, 0) AS n,
    -- Mean (ms).
    s.mean AS mean,
    -- Median (ms).
    s.q[1] AS p50,
    -- 90th percentile (ms).
    s.q[2] AS p90,
    -- 95th percentile (ms).
    s.q[3] AS p95,
    -- 99th percentile (ms).
    s.q[4] AS p99,
    -- Maximum (ms).
    s.max AS max
FROM (
    VALUES (1, 'ttft_ms'), (2, 'tpot_ms'), (3, 'tbt_ms'), (4, 'e2e_ms'), (5, 'tokenize_ms'),
        (6, 'queue_ms'), (7, 'prefill_ms'), (8, 'decode_ms'), (9, 'residual_ms')
) AS m (k, metric)
LEFT JOIN _kpi_stats AS s USING (k)
ORDER BY m.k;

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
