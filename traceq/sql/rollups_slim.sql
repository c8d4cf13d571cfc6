-- Once request_tbt is materialised (rollups_materialise.sql), the materialised _request_gaps
-- holds the same rows again (request_tbt is _request_gaps plus a stall count, ~150 bytes a
-- request: 159 MB of 416 at 1 M requests) and is read only by gap_context, for the median
-- gap and the view. A temporary view over request_tbt takes its place (traceq/playbooks/
-- rollups.py); long_gaps, read only by gap_stalls (materialised before), is left out, so a
-- query that wanted it fails rather than reading nothing.
DROP TABLE temp.main._request_gaps;
CREATE TEMP VIEW _request_gaps AS
SELECT
    request_id,
    source_id,
    view,
    n_gaps,
    [tbt_p50_ms, tbt_p99_ms] AS tbt_q,
    tbt_max_ms AS mx,
    t_first_token AS t_first,
    t_last_token AS t_last
FROM request_tbt;
