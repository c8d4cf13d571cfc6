-- Shared rollups of the playbook engine (traceq/playbooks/rollups.py): per-request and
-- per-window statistics that several playbooks read. They are views like any other (so
-- `traceq sql` and the docs see them); `traceq diagnose` materialises the small ones once per
-- run into temporary tables of the same name, which shadow the views for the playbooks'
-- queries. Constants that judge (stall definition) are the defaults of the tbt-jitter
-- playbook's parameters; playbooks that take them as parameters recompute from gap_stalls.
--
-- Cost by construction (docs/PERFORMANCE.md, "Diagnose"): every chunk gap is read by two
-- grouped passes (per request in _request_gaps, per window in _window_tbt), which `traceq
-- diagnose` runs in parts so that their quantile states stay bounded
-- (traceq/playbooks/rollups.py); only gaps of at least 100 ms get the per-gap context (two
-- ASOF joins against the prefill timeline, in gap_stalls, from the per-request pass).
-- gap_context stays a view over every gap, computed when a query reads it, so playbooks read
-- it for one incident's time range (the ts filter reaches the token scan), never whole.

-- Internal (not a public view): the client's own chunks of the requests a server row stands
-- for, which token_gaps leaves out.
CREATE OR REPLACE VIEW _client_only_gaps AS
SELECT c.request_id, c.source_id, 'client' AS view, c.ts, c.tbt_ns, c.tbt_ms
FROM client_token_gaps AS c
ANTI JOIN request_phases AS p ON p.request_id = c.request_id AND p.source_id = c.source_id;

-- Internal (not a public view): every engine stats line with its engine's batch cap as the
-- log tells it (per file, instance, engine and process): the max_num_seqs its server process
-- printed at start-up (a restart prints its own; else what any process of the same file
-- printed), whether the process or file printed its arguments at all (then the version's
-- default holds where max_num_seqs is not among them), and the most requests the engine ran
-- at once. Read by ttft-queueing's causes.
CREATE OR REPLACE VIEW _engine_lines AS
WITH args AS (
    SELECT
        source_id,
        process,
        max(value) FILTER (WHERE kind = 'setting_max_num_seqs' AND value > 0) AS printed
    FROM events
    WHERE kind LIKE 'setting_%'
    GROUP BY source_id, process
),
by_file AS (
    SELECT source_id, max(printed) AS printed FROM args GROUP BY source_id
)
SELECT
    e.*,
    max(e.running) OVER (PARTITION BY e.source_id, e.instance, e.engine, e.process) AS peak,
    CASE WHEN own.source_id IS NOT NULL THEN own.printed ELSE f.printed END AS printed,
    own.source_id IS NOT NULL OR f.source_id IS NOT NULL AS args_printed
FROM engine_stats AS e
LEFT JOIN args AS own
    ON own.source_id = e.source_id AND own.process IS NOT DISTINCT FROM e.process
LEFT JOIN by_file AS f ON f.source_id = e.source_id;

-- Internal (not a public view): which engine a request ran on, for the prefill timeline. A
-- prefill stalls the decode steps of its own engine only, so on a dataset of several
-- instances each has its own timeline; with one instance (or none named) every request is on
-- the one engine, including requests whose row names no instance (sampled traces, a client
-- export beside one server). Only requests off the default engine '' have a row (readers
-- LEFT JOIN it and take '' for the rest), so a dataset of one instance has none: at a
-- million requests a row for each was 50 MB held through `traceq diagnose` for nothing.
CREATE OR REPLACE VIEW _request_engine AS
SELECT request_id, instance AS engine
FROM request_phases
WHERE instance IS NOT NULL AND instance <> ''
    AND (SELECT count(DISTINCT instance) FROM request_phases) > 1;

-- Internal (not a public view): the time bucket of the prefill timeline's running sum, 10 s
-- (ts in ns). The width bounds the work of both levels below: a 9-hour run has 3,240
-- buckets and a day 8,640 per engine, far more (engine, bucket) partitions than a cluster
-- has tasks (Spark's default is 200 shuffle partitions), so the window within buckets spreads
-- over all of them; the running sum over bucket totals stays a few thousand rows per engine;
-- and at 1 M requests in 9 hours (31 first tokens a second) a bucket holds ~300 rows.
CREATE OR REPLACE MACRO _prefill_bucket(ts) AS ts // 10000000000;

-- Internal (not a public view): per engine, the running total of uncached prompt tokens whose
-- prefill finished (first token) by each time (a disaggregated request's on its
-- prefill_instance); a gap's prefill_tokens is the difference
-- between its two ends on its own request's engine (ASOF joins in gap_context and gap_stalls).
-- The running sum is taken in two levels, so that no window partition holds a whole engine's
-- first tokens (Spark sorts and sums one window partition in one task): the tokens of the
-- (engine, bucket)s before each one (a running sum over one row per bucket), plus the running
-- sum within its (engine, bucket). The same rows as `sum(tokens) OVER (PARTITION BY engine
-- ORDER BY ts)`: buckets follow ts, and ts is unique per engine (firsts groups by it).
-- cum_tokens is BIGINT: DuckDB sums integers as HUGEINT, which Parquet has no type for (the
-- rollup is written to a file, rollups_materialise.sql), and a fleet's prompt tokens stay far
-- below 2^63.
CREATE OR REPLACE VIEW _prefill_timeline AS
WITH firsts AS (
    SELECT
        -- a disaggregated request's prefill stalls its prefill instance's steps, not those
        -- of the instance that decodes it (one engine in both roles stays on its engine)
        coalesce(
            CASE WHEN p.prefill_instance <> '' AND p.prefill_instance IS DISTINCT FROM p.instance
                THEN p.prefill_instance END,
            e.engine,
            ''
        ) AS engine,
        p.t_arrival + p.ttft_ns AS ts,
        _prefill_bucket(p.t_arrival + p.ttft_ns) AS bucket,
        sum(greatest(coalesce(p.prompt_tokens, 0) - coalesce(p.cached_tokens, 0), 0)) AS tokens
    FROM request_phases AS p
    LEFT JOIN _request_engine AS e USING (request_id)
    WHERE p.ttft_ns IS NOT NULL
    GROUP BY ALL
),
buckets AS (
    SELECT
        engine,
        bucket,
        sum(sum(tokens)) OVER (PARTITION BY engine ORDER BY bucket) - sum(tokens) AS before
    FROM firsts
    GROUP BY engine, bucket
)
SELECT
    f.engine,
    f.ts,
    CAST(
        b.before + sum(f.tokens) OVER (PARTITION BY f.engine, f.bucket ORDER BY f.ts) AS BIGINT
    ) AS cum_tokens
FROM firsts AS f
JOIN buckets AS b ON b.engine = f.engine AND b.bucket IS NOT DISTINCT FROM f.bucket;

-- @view chunk_gaps
-- One row per chunk of every request the rollups judge: the chunks of the row standing for
-- each request (token_gaps) and the client's own chunks where a server row stands for the
-- request (client_token_gaps), so stalls only the client saw stay visible. A request's first
-- chunk has a null gap.
CREATE OR REPLACE VIEW chunk_gaps AS
WITH g AS (
    SELECT request_id, source_id, view, ts, tbt_ns, tbt_ms FROM token_gaps
    UNION ALL
    SELECT request_id, source_id, view, ts, tbt_ns, tbt_ms FROM _client_only_gaps
)
SELECT
    -- Request id.
    request_id,
    -- Source file of the chunks.
    source_id,
    -- server or client: the view of the row the chunks belong to.
    view,
    -- Chunk time, ns since the Unix epoch (UTC).
    ts,
    -- Gap since the previous chunk (ns).
    tbt_ns,
    -- Gap since the previous chunk (ms).
    tbt_ms
FROM g;

-- @view diag_window
-- One row: the time grid of the per-window rollups. The run spans the first arrival to the
-- last token (request_phases), else the engine stats, GPU samples or events; windows are
-- window_s long, chosen so that a run has about 60 of them (at least 10 s, so a window holds
-- several engine-stats lines, and at most 300 s, so a 20-minute incident spans four windows)
-- and aligned on multiples of window_s since the epoch.
CREATE OR REPLACE VIEW diag_window AS
WITH spans AS (
    SELECT 1 AS ord, min(t_arrival) AS t0, max(t_arrival + coalesce(e2e_ns, 0)) AS t1
    FROM request_phases
    UNION ALL
    SELECT 2, min(ts), max(ts) FROM engine_stats
    UNION ALL
    SELECT 3, min(ts), max(ts) FROM gpu_samples
    UNION ALL
    SELECT 4, min(ts), max(ts) FROM events
),
first_known AS (
    SELECT t0, t1 FROM spans WHERE t0 IS NOT NULL ORDER BY ord LIMIT 1
),
sized AS (
    SELECT
        t0,
        t1,
        CAST(least(300, greatest(10, ceil((t1 - t0) / 1e9 / 60))) AS BIGINT) AS w_s
    FROM first_known
)
SELECT
    -- First time of the run, ns since the Unix epoch (UTC).
    t0 AS t_start,
    -- Last time of the run (ns).
    t1 AS t_end,
    -- Window length (s).
    w_s AS window_s,
    -- Window length (ns).
    w_s * 1000000000 AS window_ns,
    -- Start of the first window (ns): t_start rounded down to a multiple of window_ns.
    t0 // (w_s * 1000000000) * (w_s * 1000000000) AS grid_start
FROM sized;

-- Internal (not a public view): the chunk gaps that the per-window pass, _window_tbt, reads:
-- every chunk gap. `traceq diagnose` fills it one part at a time on DuckDB, with a temporary
-- view of the same name holding one part's chunks (traceq/sql/rollups_time_parts.sql), because
-- the quantile states of one pass over every chunk grow with the dataset (docs/PERFORMANCE.md,
-- "Diagnose"). The per-request rows, _request_gaps, are in traceq/sql/request_gaps.sql.
CREATE OR REPLACE VIEW _window_chunks AS SELECT * FROM chunk_gaps;

-- @view gap_context
-- One row per chunk gap (token_gaps rows with a gap) with what else happened meanwhile:
-- the prompt tokens whose prefill other requests on the same engine finished inside the gap
-- (their first token fell in it; request_phases, uncached prompt tokens; with several
-- instances in the dataset, only the request's own instance counts, and a disaggregated
-- request's prefill counts on its prefill_instance), the request's median gap, and the
-- view of the source. The input of interference and stall checks.
CREATE OR REPLACE VIEW gap_context AS
WITH gaps AS (
    SELECT
        c.request_id,
        c.source_id,
        coalesce(e.engine, '') AS engine,
        c.ts - CAST(c.tbt_ns AS BIGINT) AS ts_prev,
        c.ts,
        c.tbt_ms
    FROM chunk_gaps AS c
    LEFT JOIN _request_engine AS e USING (request_id)
    WHERE c.tbt_ns IS NOT NULL
),
at_end AS (
    SELECT g.*, coalesce(t.cum_tokens, 0) AS cum_end
    FROM gaps AS g
    ASOF LEFT JOIN _prefill_timeline AS t ON g.engine = t.engine AND g.ts >= t.ts
),
at_both AS (
    SELECT g.*, coalesce(t.cum_tokens, 0) AS cum_start
    FROM at_end AS g
    ASOF LEFT JOIN _prefill_timeline AS t ON g.engine = t.engine AND g.ts_prev >= t.ts
)
SELECT
    -- Request id.
    b.request_id AS request_id,
    -- Source file of the chunks.
    b.source_id AS source_id,
    -- server or client (view of the source).
    q.view AS view,
    -- Previous chunk, ns since the Unix epoch (UTC).
    b.ts_prev AS ts_prev,
    -- This chunk (ns).
    b.ts AS ts,
    -- The gap (ms).
    b.tbt_ms AS tbt_ms,
    -- The request's median gap (ms; request_tbt).
    q.tbt_q[1] AS req_tbt_p50_ms,
    -- Uncached prompt tokens of requests prefilled on the same engine (instance; a
    -- disaggregated request's prefill_instance) whose first token fell inside the gap.
    b.cum_end - b.cum_start AS prefill_tokens
FROM at_both AS b
JOIN _request_gaps AS q ON q.request_id = b.request_id AND q.source_id = b.source_id;

-- @view gap_stalls
-- gap_context for the gaps of at least 100 ms only: every gap a playbook may call a stall
-- (tbt-jitter's stall_floor_ms and prefill-interference's stall_ms start there), a small
-- share of all gaps, so the stall rollups and checks read this instead of every gap. The
-- rows come from the grouped pass of request_tbt (no second pass over the chunks);
-- tests/test_playbooks_rollups.py checks them against gap_context.
CREATE OR REPLACE VIEW gap_stalls AS
WITH long AS (
    SELECT request_id, source_id, view, tbt_q[1] AS p50, unnest(long_gaps) AS g
    FROM _request_gaps
    WHERE request_id IS NOT NULL AND source_id IS NOT NULL
),
gaps AS (
    SELECT
        l.request_id,
        l.source_id,
        l.view,
        l.p50,
        coalesce(e.engine, '') AS engine,
        l.g.ts - l.g.tbt_ns AS ts_prev,
        l.g.ts AS ts,
        l.g.tbt_ns / 1e6 AS tbt_ms
    FROM long AS l
    LEFT JOIN _request_engine AS e USING (request_id)
),
-- The running prefill total at each end of each gap: the ASOF join reads only the distinct
-- (engine, time) points, not the gaps with their ids (an ASOF join sorts all its left rows in
-- memory: with the ids it took 0.9 GB at 3 M requests and a million stalls, this way 0.2 GB).
points AS (
    SELECT engine, ts FROM gaps
    UNION
    SELECT engine, ts_prev FROM gaps
),
cum AS (
    SELECT p.engine, p.ts, coalesce(t.cum_tokens, 0) AS cum_tokens
    FROM points AS p
    ASOF LEFT JOIN _prefill_timeline AS t ON p.engine = t.engine AND p.ts >= t.ts
),
at_both AS (
    SELECT g.*, e.cum_tokens AS cum_end, s.cum_tokens AS cum_start
    FROM gaps AS g
    JOIN cum AS e ON e.engine = g.engine AND e.ts = g.ts
    JOIN cum AS s ON s.engine = g.engine AND s.ts = g.ts_prev
)
SELECT
    -- Request id.
    request_id,
    -- Source file of the chunks.
    source_id,
    -- server or client (view of the source).
    view,
    -- Previous chunk, ns since the Unix epoch (UTC).
    ts_prev,
    -- This chunk (ns).
    ts,
    -- The gap (ms), at least 100.
    tbt_ms,
    -- The request's median gap (ms; request_tbt).
    p50 AS req_tbt_p50_ms,
    -- Uncached prompt tokens of requests prefilled on the same engine (instance; a
    -- disaggregated request's prefill_instance) whose first token fell inside the gap.
    cum_end - cum_start AS prefill_tokens
FROM at_both;

-- @view request_tbt
-- One row per request and token source (server spans, client spans): its chunk gaps
-- summarised. A stall is a gap longer than max(4 × the request's median gap, 250 ms), the
-- defaults of tbt-jitter's stall_k and stall_floor_ms.
CREATE OR REPLACE VIEW request_tbt AS
WITH stalls AS (
    SELECT request_id, source_id, count(*) AS n_stalls
    FROM gap_stalls
    WHERE tbt_ms > greatest(4 * req_tbt_p50_ms, 250)
    GROUP BY request_id, source_id
)
SELECT
    -- Request id.
    p.request_id AS request_id,
    -- Source file of the chunks.
    p.source_id AS source_id,
    -- server or client: the view of the source that recorded the chunks.
    p.view AS view,
    -- First chunk, ns since the Unix epoch (UTC).
    p.t_first AS t_first_token,
    -- Last chunk (ns).
    p.t_last AS t_last_token,
    -- Gaps between consecutive chunks.
    p.n_gaps AS n_gaps,
    -- Median gap (ms).
    p.tbt_q[1] AS tbt_p50_ms,
    -- 99th percentile gap (ms).
    p.tbt_q[2] AS tbt_p99_ms,
    -- Longest gap (ms).
    p.mx AS tbt_max_ms,
    -- Gaps longer than max(4 × tbt_p50_ms, 250 ms).
    coalesce(s.n_stalls, 0) AS stalls
FROM _request_gaps AS p
LEFT JOIN stalls AS s USING (request_id, source_id);

-- Internal (not a public view; indented so that traceq/docs.py reads past it): window_stats's
-- chunk-gap columns, one row per window that has gaps (chunk time on the diag_window grid), so
-- a pass over a time range that starts and ends on the grid gives its windows' rows whole.
CREATE OR REPLACE VIEW _window_tbt AS (
    SELECT
        w.grid_start + (c.ts - w.grid_start) // w.window_ns * w.window_ns AS ts,
        count(*) AS n_gaps,
        quantile_cont(c.tbt_ms, [0.5, 0.99]) AS tbt_q
    FROM _window_chunks AS c, diag_window AS w
    WHERE c.tbt_ns IS NOT NULL
    GROUP BY ALL
);

-- @view window_stats
-- One row per time window of diag_window (every window of the run, empty ones included):
-- requests by arrival (rate, TTFT, phases, errors), chunk gaps by time (TBT, stalls),
-- engine stats (running, waiting, KV usage, preemptions) and GPU samples (activity,
-- clocks) in the window. The grid every windowed playbook judges on.
CREATE OR REPLACE VIEW window_stats AS
WITH grid AS (
    SELECT
        w.window_s,
        g.generate_series AS ts,
        g.generate_series + w.window_ns AS ts_end
    FROM diag_window AS w,
        generate_series(w.grid_start, w.t_end, w.window_ns) AS g
),
req AS (
    SELECT
        w.grid_start + (r.t_arrival - w.grid_start) // w.window_ns * w.window_ns AS ts,
        count(r.request_id) AS n,
        count(r.error) AS errors,
        quantile_cont(r.ttft_ms, [0.5, 0.99]) AS ttft_q,
        quantile_cont(r.e2e_ms, [0.5, 0.99]) AS e2e_q,
        quantile_cont(r.tpot_ms, [0.5, 0.99]) AS tpot_q,
        quantile_cont(r.queue_ms, 0.5) AS queue_p50,
        quantile_cont(r.tokenize_ms, 0.5) AS tokenize_p50,
        sum(r.queue_ms) FILTER (WHERE r.error IS NULL AND r.queue_ms IS NOT NULL)
        / nullif(sum(r.ttft_ms) FILTER (WHERE r.error IS NULL AND r.queue_ms IS NOT NULL), 0)
            AS queue_share,
        sum(r.tokenize_ms) FILTER (WHERE r.error IS NULL AND r.tokenize_ms IS NOT NULL)
        / nullif(sum(r.ttft_ms) FILTER (WHERE r.error IS NULL AND r.tokenize_ms IS NOT NULL), 0)
            AS tokenize_share,
        sum(r.prefill_ms) FILTER (WHERE r.error IS NULL AND r.prefill_ms IS NOT NULL)
        / nullif(sum(r.ttft_ms) FILTER (WHERE r.error IS NULL AND r.prefill_ms IS NOT NULL), 0)
            AS prefill_share,
        avg(r.prompt_tokens) AS prompt_mean,
        sum(r.output_tokens) AS output_tokens
    FROM request_phases AS r, diag_window AS w
    GROUP BY ALL
),
tbt AS (SELECT * FROM _window_tbt),
stall AS (
    SELECT
        w.grid_start + (c.ts - w.grid_start) // w.window_ns * w.window_ns AS ts,
        count(*) AS stalls
    FROM gap_stalls AS c, diag_window AS w
    WHERE c.tbt_ms > greatest(4 * c.req_tbt_p50_ms, 250)
    GROUP BY ALL
),
eng AS (
    SELECT
        w.grid_start + (e.ts - w.grid_start) // w.window_ns * w.window_ns AS ts,
        count(*) AS n_stats,
        avg(e.running) AS running,
        max(e.waiting) AS waiting_max,
        max(e.kv_usage) AS kv_max,
        avg(e.gen_tps) AS gen_tps,
        avg(e.prompt_tps) AS prompt_tps
    FROM engine_stats AS e, diag_window AS w
    GROUP BY ALL
),
pre AS (
    SELECT
        w.grid_start + (v.ts - w.grid_start) // w.window_ns * w.window_ns AS ts,
        count(*) AS preemptions
    FROM events AS v, diag_window AS w
    WHERE v.kind = 'preemption'
    GROUP BY ALL
),
gpu AS (
    SELECT
        w.grid_start + (s.ts - w.grid_start) // w.window_ns * w.window_ns AS ts,
        count(*) AS n_gpu,
        avg(s.util_gpu) AS util_gpu,
        avg(s.sm_active) AS sm_active,
        avg(s.dram_active) AS dram_active,
        min(s.sm_clock_mhz) AS clock_min,
        avg(s.sm_clock_mhz) AS clock_mean,
        avg(s.sm_clock_mhz) FILTER (WHERE s.util_gpu >= 50) AS clock_busy
    FROM gpu_samples AS s, diag_window AS w
    GROUP BY ALL
)
SELECT
    -- Window start, ns since the Unix epoch (UTC).
    g.ts AS ts,
    -- Window end (ns).
    g.ts_end AS ts_end,
    -- Requests arriving in the window (request_phases).
    coalesce(r.n, 0) AS arrivals,
    -- Arrivals per second.
    coalesce(r.n, 0) / g.window_s AS arrival_rate,
    -- Arrivals with an error.
    coalesce(r.errors, 0) AS errors,
    -- Median TTFT of the window's arrivals (ms).
    r.ttft_q[1] AS ttft_p50_ms,
    -- 99th percentile TTFT (ms).
    r.ttft_q[2] AS ttft_p99_ms,
    -- Median e2e (ms).
    r.e2e_q[1] AS e2e_p50_ms,
    -- 99th percentile e2e (ms).
    r.e2e_q[2] AS e2e_p99_ms,
    -- Median TPOT (ms).
    r.tpot_q[1] AS tpot_p50_ms,
    -- 99th percentile TPOT (ms).
    r.tpot_q[2] AS tpot_p99_ms,
    -- Median queue time (ms).
    r.queue_p50 AS queue_p50_ms,
    -- Median tokenization time (ms).
    r.tokenize_p50 AS tokenize_p50_ms,
    -- Share of the summed TTFT of the window's successful arrivals spent queueing.
    r.queue_share AS queue_share,
    -- Share of that TTFT spent tokenizing.
    r.tokenize_share AS tokenize_share,
    -- Share of that TTFT spent in prefill.
    r.prefill_share AS prefill_share,
    -- Mean prompt tokens of the window's arrivals.
    r.prompt_mean AS prompt_tokens_mean,
    -- Chunk gaps ending in the window (all sources).
    coalesce(t.n_gaps, 0) AS gaps,
    -- Median gap (ms).
    t.tbt_q[1] AS tbt_p50_ms,
    -- 99th percentile gap (ms).
    t.tbt_q[2] AS tbt_p99_ms,
    -- Gaps longer than max(4 × their request's median gap, 250 ms).
    coalesce(k.stalls, 0) AS stalls,
    -- Engine stats lines in the window.
    coalesce(e.n_stats, 0) AS engine_samples,
    -- Mean running requests.
    e.running AS running_mean,
    -- Most waiting requests seen.
    e.waiting_max AS waiting_max,
    -- Highest GPU KV-cache usage seen (ratio 0-1).
    e.kv_max AS kv_usage_max,
    -- Mean generation throughput (tokens/s).
    e.gen_tps AS gen_tps,
    -- Mean prompt throughput (tokens/s).
    e.prompt_tps AS prompt_tps,
    -- Preemption events in the window.
    coalesce(p.preemptions, 0) AS preemptions,
    -- GPU samples in the window (all GPUs).
    coalesce(u.n_gpu, 0) AS gpu_samples,
    -- Mean GPU utilisation (%).
    u.util_gpu AS util_gpu,
    -- Mean SM activity (ratio 0-1).
    u.sm_active AS sm_active,
    -- Mean DRAM activity (ratio 0-1).
    u.dram_active AS dram_active,
    -- Lowest SM clock (MHz).
    u.clock_min AS sm_clock_min_mhz,
    -- Mean SM clock (MHz).
    u.clock_mean AS sm_clock_mhz,
    -- Mean SM clock of the samples with util_gpu >= 50 % (MHz): idle GPUs clock down, so a
    -- throttle shows only while busy.
    u.clock_busy AS sm_clock_busy_mhz
FROM grid AS g
LEFT JOIN req AS r ON r.ts = g.ts
LEFT JOIN tbt AS t ON t.ts = g.ts
LEFT JOIN stall AS k ON k.ts = g.ts
LEFT JOIN eng AS e ON e.ts = g.ts
LEFT JOIN pre AS p ON p.ts = g.ts
LEFT JOIN gpu AS u ON u.ts = g.ts
ORDER BY g.ts;
