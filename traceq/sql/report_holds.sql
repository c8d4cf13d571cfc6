-- What a dataset with no requests holds instead, one row (`traceq report`'s refusal says so,
-- traceq/cli/report.py): the load tools whose summary figures are in tool_metrics and how many
-- figures, and the rows of the engine's stats lines and of the GPU samples.
SELECT
    (SELECT string_agg(DISTINCT tool, ', ' ORDER BY tool) FROM tool_metrics) AS tools,
    (SELECT count(*) FROM tool_metrics) AS tool_figures,
    (SELECT count(*) FROM engine_stats) AS stats_lines,
    (SELECT count(*) FROM gpu_samples) AS gpu_samples
