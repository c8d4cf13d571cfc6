-- Which row stands for each request: settled once when the dataset's sources change
-- (traceq/pick.py), so no view ranks rows per query. docs/METRICS.md "One row per request".
-- Inputs: requests (every listed source's rows) and _source_order (source_id, ord: manifest
-- order, earliest ingested first).
--
-- A request is its request_id. Rows with the same request_id and view are copies of one
-- request (a gzipped or CRLF copy of a file, a second export of the same requests): the one
-- with the finest stamps is kept, then the earliest ingested. Of a request's kept rows, the
-- server row stands for it (docs/METRICS.md); the client row stays the request's client view.

CREATE OR REPLACE TEMP TABLE _picked AS
WITH ranked AS (
    SELECT
        r.*,
        o.ord AS _ord,
        row_number() OVER (
            PARTITION BY r.request_id, r.view
            ORDER BY r.time_resolution_ns ASC NULLS LAST, o.ord, r.t_arrival NULLS LAST
        ) AS _copy,
        count(*) OVER (PARTITION BY r.request_id, r.view) AS copies
    FROM requests AS r
    JOIN _source_order AS o USING (source_id)
)
SELECT
    * EXCLUDE (_ord, _copy),
    row_number() OVER (
        PARTITION BY request_id
        ORDER BY (view = 'server') DESC, time_resolution_ns ASC NULLS LAST, _ord,
            t_arrival NULLS LAST
    ) = 1 AS is_primary
FROM ranked
WHERE _copy = 1;

-- Per source: how many of its request rows were kept (as the request, and as its client
-- view). A source all of whose rows are kept lends every token to the views unfiltered; one
-- with none is skipped; only the rest are joined to the pick (traceq/db.py).
CREATE OR REPLACE TEMP VIEW _pick_modes AS
WITH kept AS (
    SELECT
        source_id,
        count(*) FILTER (WHERE is_primary) AS n_primary,
        count(*) FILTER (WHERE view = 'client') AS n_client
    FROM _picked
    GROUP BY source_id
),
totals AS (
    SELECT
        source_id,
        count(*) AS n_rows,
        count(*) FILTER (WHERE view = 'client') AS n_client_rows
    FROM requests
    GROUP BY source_id
)
SELECT
    t.source_id,
    CASE coalesce(k.n_primary, 0) WHEN 0 THEN 'none' WHEN t.n_rows THEN 'all' ELSE 'some' END
        AS "primary",
    CASE coalesce(k.n_client, 0) WHEN 0 THEN 'none' WHEN t.n_client_rows THEN 'all' ELSE 'some'
    END AS client
FROM totals AS t
LEFT JOIN kept AS k USING (source_id)
ORDER BY t.source_id;

-- The rows written to request_pick/<key>.parquet: in arrival order, so that time-range
-- filters on request_phases skip row groups by their statistics.
CREATE OR REPLACE TEMP VIEW _pick_rows AS
SELECT * FROM _picked ORDER BY t_arrival NULLS LAST, request_id, view;
