-- The per-request rows of the chunk gaps (request_tbt without its stall count), which
-- traceq/sql/rollups.sql reads: `_request_gaps`, one row per request and source of
-- chunk_gaps, from the request_gaps rows written at ingest where a source has them
-- (traceq/layout_rollups.py) and from the source's chunks where it has not.

-- Internal (not a public view): the chunk gaps that the per-request pass,
-- _request_gaps_computed, reads: the chunk_gaps rows of the sources without rollups
-- (traceq/db.py, token_views; a dataset written by this traceq has none), picked as
-- token_gaps and _client_only_gaps (rollups.sql) pick them. `traceq diagnose` fills the pass
-- one part at a time on DuckDB, with a temporary view of the same name holding one part's
-- chunks (traceq/sql/rollups_time_parts.sql), because the quantile states of one pass over
-- every chunk grow with the dataset (docs/PERFORMANCE.md, "Diagnose").
CREATE OR REPLACE VIEW _request_chunks AS (
    WITH primary_chunks AS (
        SELECT request_id, source_id, view, ts, gap_ns FROM _tokens_primary_all_unrolled
        UNION ALL
        SELECT t.request_id, t.source_id, t.view, t.ts, t.gap_ns
        FROM _tokens_primary_some_unrolled AS t
        SEMI JOIN _request_pick AS p
            ON p.is_primary
            AND p.source_id = t.source_id
            AND p.request_id = t.request_id
            AND p.view = t.view
    ),
    client_chunks AS (
        SELECT request_id, source_id, ts, gap_ns
        FROM _tokens_client_all_unrolled
        WHERE view = 'client'
        UNION ALL
        SELECT t.request_id, t.source_id, t.ts, t.gap_ns
        FROM _tokens_client_some_unrolled AS t
        SEMI JOIN _request_pick AS p
            ON p.view = 'client'
            AND t.view = 'client'
            AND p.source_id = t.source_id
            AND p.request_id = t.request_id
    )
    SELECT request_id, source_id, view, ts, gap_ns AS tbt_ns, gap_ns / 1e6 AS tbt_ms
    FROM primary_chunks
    UNION ALL
    SELECT c.request_id, c.source_id, 'client' AS view, c.ts, c.gap_ns, c.gap_ns / 1e6
    FROM client_chunks AS c
    ANTI JOIN request_phases AS p ON p.request_id = c.request_id AND p.source_id = c.source_id
);

-- Internal (not a public view; indented so that traceq/docs.py reads past it): request_tbt
-- without the stall count, one row per request and source of chunk_gaps. The rows of the
-- sources with rollups are the request_gaps rows written at ingest (traceq/layout_rollups.py,
-- the same figures from the same chunks), picked as token_gaps and _client_only_gaps pick
-- their chunks (_request_gaps_stored); the others come from one grouped pass over their chunks
-- (_request_gaps_computed: both percentiles from one list quantile, one sort per request),
-- which also collects the request's gaps of 100 ms and more (long_gaps) so that gap_stalls
-- needs no second pass. gap_context reads the median here, request_tbt adds the stalls.
CREATE OR REPLACE VIEW _request_gaps_computed AS (
    SELECT
        request_id,
        source_id,
        any_value(view) AS view,
        count(tbt_ms) AS n_gaps,
        quantile_cont(tbt_ms, [0.5, 0.99]) AS tbt_q,
        max(tbt_ms) AS mx,
        min(ts) AS t_first,
        max(ts) AS t_last,
        list({'ts': ts, 'tbt_ns': tbt_ns}) FILTER (WHERE tbt_ns >= 100000000) AS long_gaps
    FROM _request_chunks
    GROUP BY request_id, source_id
);

CREATE OR REPLACE VIEW _request_gaps_stored AS (
    WITH primary_rows AS (
        SELECT * FROM _gaps_primary_all
        UNION ALL
        SELECT g.*
        FROM _gaps_primary_some AS g
        SEMI JOIN _request_pick AS p
            ON p.is_primary
            AND p.source_id = g.source_id
            AND p.request_id = g.request_id
            AND p.view = g.view
    ),
    client_rows AS (
        SELECT * FROM _gaps_client_all WHERE view = 'client'
        UNION ALL
        SELECT g.*
        FROM _gaps_client_some AS g
        SEMI JOIN _request_pick AS p
            ON p.view = 'client'
            AND g.view = 'client'
            AND p.source_id = g.source_id
            AND p.request_id = g.request_id
    ),
    picked AS (
        SELECT * FROM primary_rows
        UNION ALL
        SELECT c.*
        FROM client_rows AS c
        ANTI JOIN request_phases AS p ON p.request_id = c.request_id AND p.source_id = c.source_id
    )
    SELECT
        request_id,
        source_id,
        view,
        n_gaps,
        CASE WHEN n_gaps > 0 THEN [tbt_p50_ms, tbt_p99_ms] END AS tbt_q,
        tbt_max_ms AS mx,
        t_first,
        t_last,
        long_gaps
    FROM picked
);

CREATE OR REPLACE VIEW _request_gaps AS (
    SELECT * FROM _request_gaps_computed
    UNION ALL
    SELECT * FROM _request_gaps_stored
);
