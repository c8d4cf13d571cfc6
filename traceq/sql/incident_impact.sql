-- The impact of one incident (traceq/playbooks/incidents.py): the requests that arrived in
-- its window ($start, $end: ns) against the rest of the run, judged by the run's SLOs
-- ($ttft_slo_ms, $tpot_slo_ms, $e2e_slo_ms: slo-goodput's parameters). Failed requests are
-- lost; their output tokens were generated and thrown away. A request that no engine served
-- (a gateway or router failed it: _unserved_failures, traceq/sql/hops.sql) is a failure at the
-- time its first hop saw it, as error-rate counts it.
WITH judged AS (
    SELECT
        t_arrival >= $start AND t_arrival < $end AS inside,
        error IS NOT NULL AS failed,
        error IS NULL AND coalesce(ttft_ms <= $ttft_slo_ms, true)
            AND coalesce(tpot_ms <= $tpot_slo_ms, true)
            AND coalesce(e2e_ms <= $e2e_slo_ms, true) AS ok,
        ttft_ms,
        tpot_ms,
        e2e_ms,
        output_tokens
    FROM request_phases
    UNION ALL
    SELECT
        ts >= $start AND ts < $end, true, false, NULL, NULL, NULL, NULL
    FROM _unserved_failures
)
SELECT
    count(*) FILTER (WHERE inside) AS requests_in,
    count(*) FILTER (WHERE NOT inside) AS requests_out,
    count(*) AS requests_run,
    count(*) FILTER (WHERE inside AND NOT ok) AS missed_in,
    count(*) FILTER (WHERE NOT inside AND NOT ok) AS missed_out,
    avg(ok::INT) FILTER (WHERE inside) AS attained_in,
    avg(ok::INT) FILTER (WHERE NOT inside) AS attained_out,
    count(*) FILTER (WHERE inside AND failed) AS failed_in,
    coalesce(sum(output_tokens) FILTER (WHERE inside AND failed), 0) AS tokens_lost,
    quantile_cont(ttft_ms, 0.99) FILTER (WHERE inside) AS ttft_p99_in_ms,
    quantile_cont(ttft_ms, 0.99) FILTER (WHERE NOT inside) AS ttft_p99_out_ms,
    quantile_cont(tpot_ms, 0.99) FILTER (WHERE inside) AS tpot_p99_in_ms,
    quantile_cont(tpot_ms, 0.99) FILTER (WHERE NOT inside) AS tpot_p99_out_ms,
    quantile_cont(e2e_ms, 0.99) FILTER (WHERE inside) AS e2e_p99_in_ms,
    quantile_cont(e2e_ms, 0.99) FILTER (WHERE NOT inside) AS e2e_p99_out_ms
FROM judged
