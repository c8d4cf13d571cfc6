-- Write _request_gaps (rollups_materialise.sql) one part at a time, each part to its own file
-- ($path; traceq/playbooks/rollups.py): the rows computed from chunks
-- (_request_gaps_computed) of the requests whose id is in [$lo, $hi) (a null bound is open),
-- then those with a null id; then the rows written at ingest (_request_gaps_stored), whole.
-- A request's chunks all share its id, so each part holds whole requests and the parts
-- together are the view's rows. The range reaches the Parquet
-- scan: where tokens are in request-id order, each part reads only its row groups. The view
-- is named with its database (traceq/db.py opens `:memory:`): once the temporary view over
-- the files exists, `main._request_gaps` would name that view itself.
COPY (
    SELECT * FROM memory.main._request_gaps_computed
    WHERE ($lo IS NULL OR request_id >= $lo) AND ($hi IS NULL OR request_id < $hi)
) TO $path (FORMAT parquet, COMPRESSION uncompressed);
COPY (
    SELECT * FROM memory.main._request_gaps_computed WHERE request_id IS NULL
) TO $path (FORMAT parquet, COMPRESSION uncompressed);
COPY (
    SELECT * FROM memory.main._request_gaps_stored
) TO $path (FORMAT parquet, COMPRESSION uncompressed);
