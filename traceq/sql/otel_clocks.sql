-- Second pass of the OpenTelemetry ingest, part 4: each instance's clock offset from causality,
-- over the stitched traces (otel_stitch.sql). Offset o_X: instance X stamps true time + o_X;
-- the reference instance (the gateway's) has o = 0. Every causal pair of spans bounds a
-- difference of two offsets, o_A - o_B <= c; the pairs of one (A, B) are reduced to the
-- smallest c (a grouped min: intervals, never averages). The bounds of each instance against
-- the reference are then the shortest chains of such pairs (docs/INGEST.md, "Clocks").

-- Causal pairs (a, b, c) meaning o_a - o_b <= c, from raw (uncorrected) stamps:
CREATE OR REPLACE TEMP TABLE _clock_pairs AS
-- a remote child starts after its parent started
SELECT instance AS a, p_instance AS b, t_start - p_start AS c
FROM _ts
WHERE p_instance IS NOT NULL AND p_instance <> instance
UNION ALL
-- a CLIENT span covers the call it makes: its remote child ends before it does
SELECT p_instance, instance, p_end - t_end
FROM _ts
WHERE p_kind = 'CLIENT' AND p_instance IS NOT NULL AND p_instance <> instance
UNION ALL
-- the gateway span encloses the whole request: nothing of its trace (but its caller) starts
-- before it or ends after it
SELECT f.instance, s.instance, f.t_end - s.t_end
FROM _ts AS s
JOIN _first_hop AS f USING (trace_id)
WHERE f.hop = 'gateway' AND s.instance <> f.instance AND NOT s.is_client_root
UNION ALL
SELECT s.instance, f.instance, s.t_start - f.t_start
FROM _ts AS s
JOIN _first_hop AS f USING (trace_id)
WHERE f.hop = 'gateway' AND s.instance <> f.instance AND NOT s.is_client_root
UNION ALL
-- the decode side starts after the prefill engine answered (its one token): the decode
-- engine, Dynamo's decode routing decision, llm-d's call to the decode engine
SELECT x.instance, p.instance, x.t_start - p.t_first_token
FROM (
    SELECT trace_id, instance, t_arrival AS t_start FROM _roles WHERE role = 'decode'
    UNION ALL
    SELECT trace_id, instance, t_start FROM _ts
    WHERE (hop = 'router' AND a_route_phase = 'Decode') OR name = 'llm_d.pd_proxy.decode'
) AS x
JOIN _roles AS p ON p.trace_id = x.trace_id AND p.role = 'prefill' AND p.served
WHERE p.t_first_token IS NOT NULL AND x.instance <> p.instance
UNION ALL
-- the sidecar's call to an engine encloses it (llm-d passes the trace context on unchanged,
-- so the engine is the call's sibling, not its child); only where the trace has one call and
-- one engine of that role, so that the pair is certain
SELECT e.instance, x.instance, e.t_start - x.t_start
FROM _roles AS e
JOIN _ts AS x
    ON x.trace_id = e.trace_id AND x.name = 'llm_d.pd_proxy.' || e.role
WHERE e.role IN ('prefill', 'decode') AND e.instance <> x.instance
    AND (SELECT count(*) FROM _roles AS o WHERE o.trace_id = e.trace_id AND o.role = e.role) = 1
    AND (CASE e.role WHEN 'prefill' THEN e.pp_count ELSE e.pd_count END) = 1
UNION ALL
SELECT x.instance, e.instance, x.t_end - e.t_end
FROM _roles AS e
JOIN _ts AS x
    ON x.trace_id = e.trace_id AND x.name = 'llm_d.pd_proxy.' || e.role
WHERE e.role IN ('prefill', 'decode') AND e.instance <> x.instance
    AND (SELECT count(*) FROM _roles AS o WHERE o.trace_id = e.trace_id AND o.role = e.role) = 1
    AND (CASE e.role WHEN 'prefill' THEN e.pp_count ELSE e.pd_count END) = 1;

CREATE OR REPLACE TEMP TABLE _clock_edges AS
SELECT a, b, min(c) AS c, count(*) AS n
FROM _clock_pairs
WHERE a IS NOT NULL AND b IS NOT NULL AND a <> b
GROUP BY a, b;

-- The reference clock: the instance hosting most first hops (gateway before router before
-- sidecar); without any, the instance of most served engines.
CREATE OR REPLACE TEMP TABLE _clock_ref AS
SELECT instance
FROM (
    SELECT
        instance,
        min(CASE hop WHEN 'gateway' THEN 1 WHEN 'router' THEN 2 ELSE 3 END) AS rank,
        count(*) AS n
    FROM _first_hop
    GROUP BY instance
    UNION ALL
    SELECT instance, 4, count(*) FROM _roles WHERE served GROUP BY instance
)
ORDER BY rank, n DESC, instance
LIMIT 1;

-- Shortest chains from the reference (lo: o_ref - o_X <= d, so o_X >= -d) and to it (hi:
-- o_X - o_ref <= d), over chains of at most three pairs: the longest the producers need is
-- gateway -> decode engine -> prefill engine (two pairs), one more for a sidecar or a client
-- between. Each direction walks the pairs its own way round; the shortest walk wins.
CREATE OR REPLACE TEMP TABLE _clock_walks AS
WITH RECURSIVE
steps AS (
    SELECT 'lo' AS dir, a AS src, b AS dst, c FROM _clock_edges
    UNION ALL
    SELECT 'hi', b, a, c FROM _clock_edges
),
walk AS (
    SELECT dir, instance AS node, CAST(0 AS BIGINT) AS d, 0 AS depth
    FROM _clock_ref, (VALUES ('lo'), ('hi')) AS t(dir)
    UNION ALL
    SELECT w.dir, s.dst, w.d + s.c, w.depth + 1
    FROM walk AS w
    JOIN steps AS s ON s.dir = w.dir AND s.src = w.node
    WHERE w.depth < 3
)
SELECT dir, node AS instance, min(d) AS d FROM walk GROUP BY dir, node;

CREATE OR REPLACE TEMP TABLE _clock_lo AS
SELECT instance, -d AS lo_ns FROM _clock_walks WHERE dir = 'lo';

CREATE OR REPLACE TEMP TABLE _clock_hi AS
SELECT instance, d AS hi_ns FROM _clock_walks WHERE dir = 'hi';

-- One row per instance of the stitched traces. The offset is 0 when 0 lies in [lo, hi] (the
-- clocks agree as far as causality can tell), else the middle of the interval; the bound is
-- how far the true offset can lie from it. An instance no chain reaches keeps offset 0 and no
-- bound; where lo > hi the spans contradict each other (the ingest warns).
CREATE OR REPLACE TEMP TABLE _clock AS
WITH instances AS (SELECT DISTINCT instance FROM _ts WHERE instance IS NOT NULL),
counted AS (
    SELECT i.instance, coalesce(sum(e.n), 0) AS n
    FROM instances AS i
    LEFT JOIN _clock_edges AS e ON e.a = i.instance OR e.b = i.instance
    GROUP BY i.instance
)
SELECT
    i.instance,
    l.lo_ns,
    h.hi_ns,
    i.instance IN (SELECT instance FROM _clock_ref) AS reference,
    c.n AS constraints,
    CASE
        WHEN l.lo_ns IS NULL OR h.hi_ns IS NULL OR (l.lo_ns <= 0 AND h.hi_ns >= 0) THEN 0
        ELSE (l.lo_ns + h.hi_ns) // 2
    END AS offset_ns,
    CASE
        WHEN l.lo_ns IS NULL OR h.hi_ns IS NULL THEN NULL
        WHEN l.lo_ns <= 0 AND h.hi_ns >= 0 THEN greatest(-l.lo_ns, h.hi_ns)
        ELSE abs(h.hi_ns - l.lo_ns) - abs(h.hi_ns - l.lo_ns) // 2
    END AS bound_ns
FROM instances AS i
LEFT JOIN _clock_lo AS l USING (instance)
LEFT JOIN _clock_hi AS h USING (instance)
JOIN counted AS c USING (instance);
