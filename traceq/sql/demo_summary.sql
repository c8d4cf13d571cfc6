-- `traceq demo`: one row of KPIs for one scenario's dataset (request_phases, token_gaps).
-- Percentiles are linear (quantile_cont); shares are sums of a phase over the sum of e2e.
SELECT
    count(*) AS requests,
    count(error) AS errors,
    round(quantile_cont(ttft_ms, 0.5), 1) AS ttft_p50,
    round(quantile_cont(ttft_ms, 0.99), 1) AS ttft_p99,
    round(quantile_cont(tpot_ms, 0.5), 2) AS tpot_p50,
    round((SELECT quantile_cont(tbt_ms, 0.99) FROM token_gaps), 1) AS tbt_p99,
    round(quantile_cont(e2e_ms, 0.5), 1) AS e2e_p50,
    round(quantile_cont(e2e_ms, 0.99), 1) AS e2e_p99,
    round(sum(tokenize_ns) / nullif(sum(e2e_ns), 0), 3) AS tokenize_share,
    round(sum(queue_ns) / nullif(sum(e2e_ns), 0), 3) AS queue_share,
    round(sum(prefill_ns) / nullif(sum(e2e_ns), 0), 3) AS prefill_share
FROM request_phases;
