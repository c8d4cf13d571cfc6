-- What the tail requests spent their time on, and what the engine was doing then
-- (traceq/playbooks/tail.py). For the requests that arrived in [$start, $end) and succeeded,
-- per metric (TTFT, TPOT, e2e): the slowest $tail_share of them (at least $min_tail; ties
-- at the threshold all count), each
-- with its dominant phase and the first engine state that held over its interval (arrival
-- to first token for TTFT, first to last token for TPOT, arrival to last token for e2e):
--   preempted     the engine preempted it (its own count or a preemption event naming it);
--   kv-full       the KV cache reached $kv_full in a stats line of the interval (or the
--                 next one: stats lines come every few seconds);
--   warm-up       it arrived within $warmup_s of the engine reporting ready;
--   throttled     (prefill, decode) the busy SM clock of the windows its interval overlaps
--                 (window_stats: every GPU's samples at util_gpu >= 50 %) averaged
--                 $clock_drop or more below the run's highest window;
--   burst         (queueing) a window within its wait of its arrival, before or after, had
--                 $burst_min_arrivals arrivals or more, at $burst_factor times the median
--                 arrival rate of the run's windows or more;
--   long-prefill  another request's prefill of $long_prompt_tokens or more uncached tokens
--                 overlapped the interval on the same engine (instance: of the request's
--                 prefill while it waited or prefilled, of its decode while it decoded; a
--                 disaggregated request prefills on its prefill_instance when that is
--                 another);
--   long-prompt   (TTFT) its own prompt was that long; long-output (e2e, decoding) its own
--                 output was in the window's longest 5 %;
--   none          none of these.
-- A request whose dominant phase is tokenization gets only long-prompt or none: the
-- tokenizer runs before the engine sees it.
-- One row per (metric, phase, state), with the metric's p99 and tail threshold, and whether
-- the dataset holds anything of the engine's (stats lines, preemption or start-up events):
-- without it, `none` only means that nothing else was seen.
WITH sized AS (
    -- one pass over the window's successful requests, narrow (a window can hold millions):
    -- per metric the count, p99 and the tail's threshold (the slowest $tail_share, or the
    -- $min_tail slowest when that is more); the longest e2e (how far before the window a
    -- long prefill can still overlap) and the output length of the window's longest 5 %
    SELECT
        count(ttft_ns) AS n_ttft,
        count(tpot_ns) AS n_tpot,
        count(e2e_ns) AS n_e2e,
        quantile_cont(ttft_ns, 0.99) AS p99_ttft,
        quantile_cont(tpot_ns, 0.99) AS p99_tpot,
        quantile_cont(e2e_ns, 0.99) AS p99_e2e,
        least(quantile_disc(ttft_ns, 1 - $tail_share),
              list_min(max(ttft_ns, CAST($min_tail AS BIGINT)))) AS thr_ttft,
        least(quantile_disc(tpot_ns, 1 - $tail_share),
              list_min(max(tpot_ns, CAST($min_tail AS BIGINT)))) AS thr_tpot,
        least(quantile_disc(e2e_ns, 1 - $tail_share),
              list_min(max(e2e_ns, CAST($min_tail AS BIGINT)))) AS thr_e2e,
        max(e2e_ns) AS max_e2e_ns,
        quantile_cont(output_tokens, 0.95) AS long_output_tokens
    FROM request_phases
    WHERE t_arrival >= $start AND t_arrival < $end AND error IS NULL
),
engines AS (
    -- every request with the engine of its decode (d_engine) and of its prefill (p_engine):
    -- with several instances in the dataset its instance, so that a prefill holds up its own
    -- engine's requests only; with one (or none named) the one engine '' (the rollups' rule,
    -- _request_engine in traceq/sql/rollups.sql); a disaggregated request prefilled on its
    -- prefill_instance, where that is another
    SELECT
        p.*,
        CASE WHEN m.many THEN coalesce(p.instance, '') ELSE '' END AS d_engine,
        coalesce(
            CASE WHEN p.prefill_instance <> '' AND p.prefill_instance IS DISTINCT FROM p.instance
                THEN p.prefill_instance END,
            d_engine
        ) AS p_engine
    FROM request_phases AS p
    CROSS JOIN (SELECT count(DISTINCT instance) > 1 AS many FROM request_phases) AS m
),
r AS (
    -- the requests in some metric's tail, with what judging them needs
    SELECT
        p.request_id,
        p.t_arrival,
        p.t_arrival + p.ttft_ns AS t_first,
        p.t_arrival + p.e2e_ns AS t_last,
        p.ttft_ns,
        p.tpot_ns,
        p.e2e_ns,
        p.tokenize_ns,
        p.queue_ns,
        p.prefill_ns,
        p.decode_ns,
        p.residual_ns,
        p.prompt_tokens - coalesce(p.cached_tokens, 0) AS new_tokens,
        p.output_tokens,
        p.d_engine,
        p.p_engine
    FROM engines AS p
    CROSS JOIN sized AS s
    WHERE p.t_arrival >= $start AND p.t_arrival < $end AND p.error IS NULL
        AND (p.ttft_ns >= s.thr_ttft OR p.tpot_ns >= s.thr_tpot OR p.e2e_ns >= s.thr_e2e)
),
tail AS (
    SELECT 'ttft' AS metric, r.*, r.ttft_ns AS v, s.n_ttft AS n, s.p99_ttft AS p99_ns,
           r.t_arrival AS a, r.t_first AS b
    FROM r, sized AS s
    WHERE r.ttft_ns >= s.thr_ttft AND s.n_ttft >= $min_requests
    UNION ALL
    SELECT 'tpot', r.*, r.tpot_ns, s.n_tpot, s.p99_tpot, r.t_first, r.t_last
    FROM r, sized AS s
    WHERE r.tpot_ns >= s.thr_tpot AND s.n_tpot >= $min_requests
    UNION ALL
    SELECT 'e2e', r.*, r.e2e_ns, s.n_e2e, s.p99_e2e, r.t_arrival, r.t_last
    FROM r, sized AS s
    WHERE r.e2e_ns >= s.thr_e2e AND s.n_e2e >= $min_requests
),
long_prefills AS (
    -- prefills of long uncached prompts anywhere in the run (scheduled to first token)
    SELECT
        p.request_id,
        p.t_arrival + coalesce(p.tokenize_ns, 0) + coalesce(p.queue_ns, 0) AS p_start,
        p.t_arrival + p.ttft_ns AS p_end,
        p.prompt_tokens - coalesce(p.cached_tokens, 0) AS new_tokens,
        p.p_engine AS engine
    FROM engines AS p
    WHERE p.prompt_tokens - coalesce(p.cached_tokens, 0) >= $long_prompt_tokens
        AND p.ttft_ns IS NOT NULL AND p.t_arrival < $end + (SELECT max_e2e_ns FROM sized)
        AND p.t_arrival + p.ttft_ns > $start
),
kv AS (
    SELECT t.metric, t.request_id, max(s.kv_usage) AS kv_max
    FROM tail AS t
    JOIN engine_stats AS s
        ON s.ts >= t.a AND s.ts <= t.b + CAST($stats_lag_s * 1e9 AS BIGINT)
    WHERE s.kv_usage IS NOT NULL
    GROUP BY ALL
),
preempted AS (
    SELECT request_id FROM _request_pick WHERE is_primary AND n_preemptions > 0
    UNION
    SELECT request_id FROM events WHERE kind = 'preemption' AND request_id IS NOT NULL
),
ready AS (
    SELECT ts FROM events WHERE kind IN ('startup_ready', 'startup_server_start')
),
warm AS (
    SELECT DISTINCT t.metric, t.request_id
    FROM tail AS t
    JOIN ready AS e ON e.ts <= t.t_arrival
        AND t.t_arrival - e.ts <= CAST($warmup_s * 1e9 AS BIGINT)
),
clocks AS (
    SELECT ts, ts_end, sm_clock_busy_mhz AS mhz, max(sm_clock_busy_mhz) OVER () AS top_mhz
    FROM window_stats
    WHERE sm_clock_busy_mhz IS NOT NULL
),
throttled AS (
    SELECT t.metric, t.request_id, avg(c.mhz) AS clock_mhz, max(c.top_mhz) AS top_mhz
    FROM tail AS t
    JOIN clocks AS c ON c.ts < t.b AND c.ts_end > t.a
    GROUP BY ALL
    HAVING avg(c.mhz) <= (1 - $clock_drop) * max(c.top_mhz)
),
phased AS (
    SELECT
        t.*,
        CASE
            WHEN t.metric = 'tpot' THEN 'decode'
            WHEN coalesce(t.queue_ns, 0) >= greatest(
                    coalesce(t.tokenize_ns, 0), coalesce(t.prefill_ns, 0),
                    CASE WHEN t.metric = 'e2e' THEN coalesce(t.decode_ns, 0) ELSE 0 END)
                AND t.queue_ns > 0 THEN 'queue'
            WHEN t.metric = 'e2e' AND coalesce(t.decode_ns, 0) >= greatest(
                    coalesce(t.tokenize_ns, 0), coalesce(t.prefill_ns, 0))
                AND t.decode_ns > 0 THEN 'decode'
            WHEN coalesce(t.prefill_ns, 0) >= coalesce(t.tokenize_ns, 0)
                AND t.prefill_ns > 0 THEN 'prefill'
            WHEN t.tokenize_ns > 0 THEN 'tokenize'
            ELSE 'unstamped'
        END AS phase
    FROM tail AS t
),
behind AS (
    -- a long prefill on the engine of the phase that held the request up: its prefill's
    -- engine while it waited or prefilled, its decode's while it decoded
    SELECT t.metric, t.request_id, max(l.new_tokens) AS ahead_tokens
    FROM phased AS t
    JOIN long_prefills AS l
        ON l.p_start < t.b AND l.p_end > t.a AND l.request_id <> t.request_id
        AND l.engine = CASE WHEN t.phase = 'decode' THEN t.d_engine ELSE t.p_engine END
    GROUP BY ALL
),
typical AS (
    SELECT median(arrival_rate) AS rate FROM window_stats WHERE arrivals > 0
),
burst AS (
    SELECT t.metric, t.request_id, max(w.arrival_rate) AS rate_rps, max(y.rate) AS typical_rps
    FROM tail AS t
    -- the windows around its wait: the arrivals just before it are the ones queued ahead
    JOIN window_stats AS w
        ON w.ts < t.t_arrival + coalesce(t.tokenize_ns, 0) + coalesce(t.queue_ns, 0)
        AND w.ts_end > t.t_arrival - coalesce(t.tokenize_ns, 0) - coalesce(t.queue_ns, 0)
    CROSS JOIN typical AS y
    WHERE w.arrivals >= $burst_min_arrivals AND w.arrival_rate >= $burst_factor * y.rate
    GROUP BY ALL
),
judged AS (
    SELECT
        t.metric,
        t.n,
        t.p99_ns,
        t.v,
        t.phase,
        CASE
            -- the tokenizer runs on the server's CPU before the engine sees the request:
            -- what the engine was doing does not hold it up, only the prompt's own length
            WHEN t.phase = 'tokenize' THEN
                CASE WHEN t.metric = 'ttft' AND t.new_tokens >= $long_prompt_tokens
                    THEN 'long-prompt' ELSE 'none' END
            WHEN t.request_id IN (SELECT request_id FROM preempted) THEN 'preempted'
            WHEN k.kv_max >= $kv_full THEN 'kv-full'
            WHEN w.request_id IS NOT NULL THEN 'warm-up'
            WHEN th.request_id IS NOT NULL AND t.phase IN ('prefill', 'decode') THEN 'throttled'
            WHEN u.request_id IS NOT NULL AND t.phase = 'queue' THEN 'burst'
            WHEN b.ahead_tokens IS NOT NULL THEN 'long-prefill'
            WHEN t.metric = 'ttft' AND t.new_tokens >= $long_prompt_tokens THEN 'long-prompt'
            WHEN t.metric = 'e2e' AND t.phase = 'decode' AND t.output_tokens >= s.long_output_tokens
                THEN 'long-output'
            ELSE 'none'
        END AS state,
        b.ahead_tokens,
        k.kv_max,
        th.clock_mhz,
        th.top_mhz,
        u.rate_rps,
        u.typical_rps
    FROM phased AS t
    LEFT JOIN behind AS b USING (metric, request_id)
    LEFT JOIN kv AS k USING (metric, request_id)
    LEFT JOIN warm AS w USING (metric, request_id)
    LEFT JOIN throttled AS th USING (metric, request_id)
    LEFT JOIN burst AS u USING (metric, request_id)
    CROSS JOIN sized AS s
)
SELECT
    metric,
    phase,
    state,
    count(*) AS requests,
    any_value(n) AS metric_requests,
    any_value(p99_ns) / 1e6 AS p99_ms,
    min(v) / 1e6 AS threshold_ms,
    max(ahead_tokens) FILTER (WHERE state = 'long-prefill') AS ahead_tokens,
    max(kv_max) FILTER (WHERE state = 'kv-full') AS kv_max,
    min(clock_mhz) FILTER (WHERE state = 'throttled') AS clock_mhz,
    max(top_mhz) FILTER (WHERE state = 'throttled') AS top_mhz,
    max(rate_rps) FILTER (WHERE state = 'burst') AS rate_rps,
    max(typical_rps) FILTER (WHERE state = 'burst') AS typical_rps,
    EXISTS (SELECT 1 FROM engine_stats)
        OR EXISTS (SELECT 1 FROM events WHERE kind IN ('preemption', 'startup_ready',
            'startup_server_start')) AS engine_seen,
    -- without prompt lengths no prefill weighs anything: no 'nothing unusual' then
    EXISTS (SELECT 1 FROM request_phases WHERE prompt_tokens IS NOT NULL) AS prompts_seen
FROM judged
GROUP BY metric, phase, state
ORDER BY metric, requests DESC, phase, state
