-- App waterfall: one request's streamed chunks (at most $limit) with the gap before each and
-- whether that gap is a stall: longer than max($stall_factor × the request's median gap,
-- $stall_floor_ms) (docs/METRICS.md "Stall"). Times in ms since the request's arrival. When
-- several sources hold chunks of the request, those of the request_phases row's source win.
WITH req AS (
    SELECT request_id, source_id, t_arrival FROM request_phases WHERE request_id = $request_id
),
chunks AS (
    SELECT g.*
    FROM token_gaps AS g
    CROSS JOIN req AS r
    WHERE g.request_id = $request_id
    QUALIFY dense_rank() OVER (ORDER BY (g.source_id = r.source_id) DESC, g.source_id) = 1
),
med AS (
    SELECT quantile_cont(tbt_ms, 0.5) AS median_ms FROM chunks
)
SELECT
    c.idx,
    (c.ts - r.t_arrival) / 1e6 AS at_ms,
    c.n_tokens,
    c.tbt_ms,
    coalesce(c.tbt_ms > greatest($stall_factor * m.median_ms, $stall_floor_ms), false) AS stall
FROM chunks AS c
CROSS JOIN req AS r
CROSS JOIN med AS m
ORDER BY c.idx
LIMIT $limit
