-- `traceq whatif` (traceq/whatif/calibrate.py): the engine steps of each instance rebuilt from
-- chunk times, summed into the normal equations of the step-time fit: y = seconds between
-- stamps, x = (engine steps, decoding requests, KV tokens held when decoding, prefill tokens,
-- prefill tokens × their context), the terms traceq/synth/engine.py charges a step. One row
-- per instance and $window_ns window of step ends (window_start: the window's start, ns), so
-- a GPU whose speed changed over the run shows it (traceq/whatif/speed.py).
--
-- Steps: vLLM streams one token per running request per step, so the chunk stamps of one
-- instance are the ends of its steps (stamps closer than $merge_ns are one step); a step's
-- decoding requests are its chunks after each request's first. A step starts when the one
-- before ended, or later when it admitted a request that came to an idle engine.
--
-- Prefill: the uncached prompts are served first come, first served, a step taking at most
-- its budget ($budget minus its decodes with $chunked prefill, else the whole budget in a
-- step without decodes and nothing in one with them). Which tokens a step prefilled follows
-- from the work admitted by then (Lindley's recursion: backlog = running sum − its running
-- minimum), and each prompt's place in that queue gives the context its tokens attend to.
-- With $chunked, a decoding request that skipped steps was preempted: it held no KV
-- meanwhile and prefilled its prompt and generated tokens again when it resumed.
--
-- Preemption storm: with $chunked, a step that decodes while requests wait on prefills
-- (scheduled with no first token yet, or preempted while decoding) larger than the free KV
-- cache ($kv_tokens minus what the requests past their prefill hold and the step's decodes)
-- thrashed: the scheduler filled the free cache (up to the step's budget) with a partial
-- prefill that a later step preempted, to recompute it from scratch (vLLM's recompute).
-- Such a step is charged that fill as prefill tokens (attending to their own chunk), the KV
-- held without the lost partial prefill, and its progress in the queue is only the work
-- the requests completed in it took. No token shows this work: without it the fit reads the
-- recompute as step overhead and KV cost.
--
-- KV held: a request's cached tokens plus its prefill so far from its scheduling to its first
-- token, then its prompt and output so far until its last token.
WITH r AS (
    SELECT
        request_id,
        source_id,
        instance,
        t_arrival,
        t_arrival + ttft_ns - prefill_ns AS t_sched,
        t_arrival + ttft_ns AS t_first,
        t_arrival + e2e_ns AS t_last,
        prompt_tokens AS prompt,
        least(coalesce(cached_tokens, 0), prompt_tokens - 1) AS cached
    FROM request_phases
    WHERE view = 'server' AND error IS NULL AND ttft_ns IS NOT NULL AND prefill_ns IS NOT NULL
      AND prompt_tokens > 0
),
chunks AS NOT MATERIALIZED (
    SELECT g.request_id, g.source_id, p.instance, g.ts, g.idx
    FROM token_gaps g
    JOIN request_phases p USING (request_id, source_id)
    WHERE g.view = 'server' AND p.error IS NULL
),
stamps AS (
    SELECT instance, ts, count(*) FILTER (WHERE idx > 0) AS n_dec
    FROM chunks
    GROUP BY instance, ts
),
breaks AS (
    SELECT
        *,
        CASE WHEN ts - lag(ts) OVER (PARTITION BY instance ORDER BY ts) <= $merge_ns THEN 0
             ELSE 1 END AS new_step
    FROM stamps
),
numbered AS (
    SELECT
        *,
        sum(new_step) OVER (PARTITION BY instance ORDER BY ts ROWS UNBOUNDED PRECEDING) AS k
    FROM breaks
),
steps AS (
    SELECT instance, k, max(ts) AS ts_end, CAST(sum(n_dec) AS DOUBLE) AS n_dec
    FROM numbered
    GROUP BY instance, k
),
placed AS (  -- each request's step indices: last step before scheduling, first token, last token
    SELECT
        r.*,
        coalesce(s0.k, 0) AS k_sched,
        s1.k AS k_first,
        s2.k AS k_last
    FROM r
    ASOF LEFT JOIN steps s0 ON r.instance = s0.instance AND r.t_sched >= s0.ts_end
    ASOF LEFT JOIN steps s1 ON r.instance = s1.instance AND r.t_first <= s1.ts_end
    ASOF LEFT JOIN steps s2 ON r.instance = s2.instance AND r.t_last <= s2.ts_end
),
spans AS (
    SELECT *, (prompt - cached) / (k_first - k_sched) AS rate
    FROM placed
    WHERE k_first IS NOT NULL AND k_last IS NOT NULL AND k_first > k_sched
),
chunk_steps AS NOT MATERIALIZED (  -- each chunk's step (with $chunked only: preemption needs it)
    SELECT c.request_id, c.source_id, c.idx, n.k
    FROM chunks c
    JOIN numbered n ON c.instance = n.instance AND c.ts = n.ts
    WHERE $chunked
),
skipping AS (  -- requests whose chunks may have skipped a step, a superset: those whose step
               -- is not their first step plus their chunk index all along (or whose indices
               -- have a gap); only their chunks are put in order below
    SELECT request_id, source_id
    FROM chunk_steps
    GROUP BY request_id, source_id
    HAVING max(k - idx) > min(k - idx) OR max(idx) - min(idx) + 1 <> count(*)
),
resumes AS (  -- decoding requests that skipped steps: preempted, then recomputed
    SELECT
        sp.instance, g.k, g.prev_k, sp.prompt + g.idx AS tokens, sp.prompt - sp.k_first AS held
    FROM (
        SELECT
            c.request_id, c.source_id, c.idx, c.k,
            lag(c.k) OVER (PARTITION BY c.request_id, c.source_id ORDER BY c.idx) AS prev_k
        FROM chunk_steps c
        SEMI JOIN skipping s ON c.request_id = s.request_id AND c.source_id = s.source_id
    ) g
    JOIN spans sp USING (request_id, source_id)
    WHERE g.k - g.prev_k > 1
),
items AS (  -- prefill work in the order it is served: resumed requests first in their step
    SELECT instance, k_sched + 1 AS k_adm, 1 AS rank, t_arrival, prompt - cached AS u,
           cached AS ctx0, k_first AS k_done
    FROM spans
    WHERE prompt > cached
    UNION ALL
    SELECT instance, k, 0, 0, tokens, 0, k
    FROM resumes
),
queue AS (  -- b: the prefill work queued ahead of each item
    SELECT
        *,
        coalesce(sum(u) OVER (PARTITION BY instance ORDER BY k_adm, rank, t_arrival
                              ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS b
    FROM items
),
deltas AS (  -- difference arrays over the step index: KV held as a + b × k (r_*: the part
               -- of it that prefills hold), the prefill tokens waited on (u_wait), admissions
    SELECT instance, k_sched + 1 AS k, cached - rate * (k_sched + 1) AS d_a, rate AS d_b,
           cached - rate * (k_sched + 1) AS r_a, rate AS r_b, prompt - cached AS u_wait,
           t_sched
    FROM spans
    UNION ALL
    SELECT instance, k_first, 0, 0, 0, 0, -(prompt - cached), NULL FROM spans
    UNION ALL
    SELECT instance, k_first + 1, -(cached - rate * (k_sched + 1)) + prompt - k_first,
           1 - rate, -(cached - rate * (k_sched + 1)), -rate, 0, NULL
    FROM spans
    UNION ALL
    SELECT instance, k_last + 1, -(prompt - k_first), -1, 0, 0, 0, NULL
    FROM spans
    UNION ALL
    SELECT instance, prev_k + 1, -held, -1, 0, 0, tokens, NULL FROM resumes
    UNION ALL
    SELECT instance, k, 0, 0, 0, 0, -tokens, NULL FROM resumes
    UNION ALL
    SELECT instance, k + 1, held, 1, 0, 0, 0, NULL FROM resumes
),
per_k AS (
    SELECT instance, k, sum(d_a) AS d_a, sum(d_b) AS d_b, sum(r_a) AS r_a, sum(r_b) AS r_b,
           sum(u_wait) AS u_wait, min(t_sched) AS t_admit
    FROM deltas
    GROUP BY instance, k
),
admitted AS (
    SELECT instance, k_adm AS k, sum(u) AS a FROM items GROUP BY instance, k_adm
),
completed AS (  -- the work served once every item whose prefill ended by the step is done
    SELECT instance, k_done AS k, max(b + u) AS d FROM queue GROUP BY instance, k_done
),
flow AS (
    SELECT
        s.instance, s.k, s.ts_end, s.n_dec,
        lag(s.ts_end) OVER w AS prev_end,
        p.t_admit,
        sum(coalesce(p.d_a, 0)) OVER (w ROWS UNBOUNDED PRECEDING)
            + s.k * sum(coalesce(p.d_b, 0)) OVER (w ROWS UNBOUNDED PRECEDING) AS kv_tokens,
        sum(coalesce(p.r_a, 0)) OVER (w ROWS UNBOUNDED PRECEDING)
            + s.k * sum(coalesce(p.r_b, 0)) OVER (w ROWS UNBOUNDED PRECEDING) AS kv_prefill,
        sum(coalesce(p.u_wait, 0)) OVER (w ROWS UNBOUNDED PRECEDING) AS u_wait,
        coalesce(a.a, 0) AS a,
        max(coalesce(d.d, 0)) OVER (w ROWS UNBOUNDED PRECEDING) AS d_run,
        CASE WHEN $chunked THEN greatest($budget - s.n_dec, 0)
             WHEN s.n_dec = 0 THEN $budget ELSE 0 END AS c1
    FROM steps s
    LEFT JOIN per_k p USING (instance, k)
    LEFT JOIN admitted a USING (instance, k)
    LEFT JOIN completed d USING (instance, k)
    WINDOW w AS (PARTITION BY s.instance ORDER BY s.k)
),
bound AS (  -- the steps of a preemption storm and the fill they prefilled
    SELECT
        *,
        greatest(0, least(c1, $kv_tokens - (kv_tokens - kv_prefill) - n_dec)) AS free,
        $chunked AND n_dec > 0
            AND u_wait > $kv_tokens - (kv_tokens - kv_prefill) - n_dec AS thrash
    FROM flow
),
lindley1 AS (  -- first pass: one engine step per stamp, no progress in a thrashing one
    SELECT
        *,
        CASE WHEN thrash THEN 0 ELSE c1 END AS c0
    FROM bound
),
lindley1_run AS (
    SELECT
        *,
        sum(a - c0) OVER (w ROWS UNBOUNDED PRECEDING) AS s_run,
        sum(a) OVER (w ROWS UNBOUNDED PRECEDING) AS a_run
    FROM lindley1
    WINDOW w AS (PARTITION BY instance ORDER BY k)
),
served1 AS (
    SELECT
        *,
        a_run - s_run + least(0, min(s_run) OVER (w ROWS UNBOUNDED PRECEDING)) AS p1
    FROM lindley1_run
    WINDOW w AS (PARTITION BY instance ORDER BY k)
),
capacity AS (  -- with chunked prefill, steps that only prefill part of a prompt stream no
               -- token: a stamp without decodes stands for as many steps as the prompts
               -- completed at it took; a thrashing step progresses by the prompts
               -- completed at it
    SELECT
        *,
        CASE WHEN thrash THEN greatest(0, d_run - coalesce(lag(p1) OVER w, 0))
             WHEN $chunked AND n_dec = 0
             THEN greatest(c0, d_run - coalesce(lag(p1) OVER w, 0)) ELSE c0 END AS c
    FROM served1
    WINDOW w AS (PARTITION BY instance ORDER BY k)
),
lindley AS (
    SELECT *, sum(a - c) OVER (w ROWS UNBOUNDED PRECEDING) AS s2_run
    FROM capacity
    WINDOW w AS (PARTITION BY instance ORDER BY k)
),
served AS (  -- p_prev, p_k: the prefill work done before and by the end of the step
    SELECT
        *,
        coalesce(lag(p_k) OVER w, 0) AS p_prev
    FROM (
        SELECT
            *,
            a_run - s2_run + least(0, min(s2_run) OVER (w ROWS UNBOUNDED PRECEDING)) AS p_k
        FROM lindley
        WINDOW w AS (PARTITION BY instance ORDER BY k)
    )
    WINDOW w AS (PARTITION BY instance ORDER BY k)
),
cuts AS (  -- every place where a step or a queued item starts, in work served
    SELECT instance, p_prev AS x FROM served WHERE p_k > p_prev
    UNION
    SELECT instance, b FROM queue
    UNION
    SELECT instance, max(p_k) FROM served GROUP BY instance
),
segments AS (
    SELECT instance, x AS x0, lead(x) OVER (PARTITION BY instance ORDER BY x) AS x1
    FROM cuts
),
attention AS (  -- each segment's tokens × their context (its item's cached and earlier chunks)
    SELECT
        g.instance,
        st.k,
        sum((g.x1 - g.x0) * (q.ctx0 + (g.x0 - q.b) + (g.x1 - g.x0) / 2)) AS attn_work
    FROM segments g
    ASOF JOIN (SELECT instance, k, p_prev FROM served WHERE p_k > p_prev) st
        ON g.instance = st.instance AND g.x0 >= st.p_prev
    ASOF JOIN queue q ON g.instance = q.instance AND g.x0 >= q.b
    WHERE g.x1 IS NOT NULL AND g.x1 > g.x0 AND g.x0 < q.b + q.u
    GROUP BY g.instance, st.k
),
x AS (
    SELECT
        s.instance,
        s.ts_end // $window_ns * $window_ns AS window_start,
        (s.ts_end - greatest(s.prev_end, coalesce(s.t_admit, s.prev_end))) / 1e9 AS y,
        CASE WHEN $chunked AND s.n_dec = 0
             THEN greatest(1, ceil((s.p_k - s.p_prev) / $budget)) ELSE 1 END AS n_steps,
        s.n_dec,
        CASE WHEN s.thrash THEN s.kv_tokens - s.kv_prefill
             WHEN s.n_dec > 0 THEN s.kv_tokens ELSE 0 END AS kv_dec,
        CASE WHEN s.thrash THEN greatest(s.free, s.p_k - s.p_prev)
             ELSE s.p_k - s.p_prev END AS prefill_tokens,
        CASE WHEN s.thrash THEN greatest(s.free, s.p_k - s.p_prev) ^ 2 / 2
             ELSE coalesce(t.attn_work, 0) END AS attn_work
    FROM served s
    LEFT JOIN attention t USING (instance, k)
    WHERE s.prev_end IS NOT NULL
)
SELECT
    instance,
    window_start,
    count(*) AS steps,
    sum(n_steps * n_steps) AS xx_00,
    sum(n_steps * n_dec) AS xx_01,
    sum(n_steps * kv_dec) AS xx_02,
    sum(n_steps * prefill_tokens) AS xx_03,
    sum(n_steps * attn_work) AS xx_04,
    sum(n_dec * n_dec) AS xx_11,
    sum(n_dec * kv_dec) AS xx_12,
    sum(n_dec * prefill_tokens) AS xx_13,
    sum(n_dec * attn_work) AS xx_14,
    sum(kv_dec * kv_dec) AS xx_22,
    sum(kv_dec * prefill_tokens) AS xx_23,
    sum(kv_dec * attn_work) AS xx_24,
    sum(prefill_tokens * prefill_tokens) AS xx_33,
    sum(prefill_tokens * attn_work) AS xx_34,
    sum(attn_work * attn_work) AS xx_44,
    sum(n_steps * y) AS xy_0,
    sum(n_dec * y) AS xy_1,
    sum(kv_dec * y) AS xy_2,
    sum(prefill_tokens * y) AS xy_3,
    sum(attn_work * y) AS xy_4,
    sum(y * y) AS yy,
    sum(y) AS y_sum,
    max(n_dec) AS max_decode,
    max(n_dec + prefill_tokens / n_steps) AS max_step_tokens,
    max(y) AS max_step_s
FROM x
GROUP BY instance, window_start
ORDER BY instance, window_start
