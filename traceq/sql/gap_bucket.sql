-- The order-keeping buckets of the chunk gaps, shared by the views (traceq/sql/views.sql,
-- _tbt_stats) and the ingest, which writes each source's gap_buckets with them
-- (traceq/layout_rollups.py): a stored bucket is the bucket a view would compute.

-- Order-keeping bucket of a gap a >= 0 (ns): 64 ns wide below 1 ms (2^20 ns), 65 µs wide
-- below 1.07 s (2^30 ns), 67 ms wide above; a larger gap never gets a smaller bucket. At most
-- 16 k buckets below 1 s; a bucket near a TBT percentile holds a few % of the gaps at most.
CREATE OR REPLACE MACRO _gap_bucket(a) AS
    CASE
        WHEN a < 1048576 THEN a >> 6
        WHEN a < 1073741824 THEN 16384 + (a >> 16)
        ELSE 32768 + (a >> 26)
    END;
