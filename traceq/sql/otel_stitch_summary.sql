-- What the stitch of one source found (traceq/ingest/otel/hops.py stitch_summary): stitched
-- requests, disaggregated ones, traces no engine served, traces with several decode attempts,
-- spans quarantined for contradicting their parent.
SELECT
    (SELECT count(*) FROM _stitched) AS requests,
    (SELECT count(*) FROM _stitched WHERE decode_instance IS NOT NULL OR prefill_instance IS NOT NULL)
        AS disaggregated,
    (SELECT count(*) FROM _unserved SEMI JOIN _hop_traces USING (trace_id)) AS unserved,
    (
        SELECT count(*) FROM (
            SELECT trace_id FROM _roles WHERE role <> 'prefill' GROUP BY trace_id HAVING count(*) > 1
        )
    ) AS retried,
    (SELECT count(*) FROM _contradicted) AS contradicted;
