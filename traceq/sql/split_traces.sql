-- Traces whose spans lie in more than one source file: one row per (source, other source)
-- with the traces they share. A request's hops are stitched within one file
-- (otel_stitch.sql), so such a trace is read as several requests, or as one lost at the
-- gateway beside one served without it (traceq/ingest/split_traces.py warns).
-- Reads `requests` and `unserved` of the OTel sources.
WITH seen AS (
    SELECT DISTINCT source_id, trace_id
    FROM requests
    WHERE view = 'server' AND trace_id IS NOT NULL
    UNION
    SELECT DISTINCT source_id, trace_id
    FROM unserved
)
SELECT a.source_id, b.source_id AS other, count(*) AS traces
FROM seen AS a
JOIN seen AS b ON a.trace_id = b.trace_id AND a.source_id <> b.source_id
GROUP BY ALL
ORDER BY a.source_id, traces DESC, other
