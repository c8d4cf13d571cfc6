-- App waterfall: the hops of one routed or disaggregated request (request_hops), each with
-- its start and end relative to the request's arrival in ms, and its lane (hop · instance);
-- none for a request one engine served alone.
SELECT
    h.hop || ' · ' || coalesce(h.instance, '?') AS lane,
    h.hop,
    h.instance,
    h.name,
    (h.t_start - r.t_arrival) / 1e6 AS start_ms,
    (h.t_end - r.t_arrival) / 1e6 AS end_ms,
    h.dur_ms,
    h.served,
    h.detail
FROM request_hops AS h
JOIN request_phases AS r ON r.request_id = h.request_id
WHERE h.request_id = $request_id AND h.t_start IS NOT NULL AND h.t_end IS NOT NULL
ORDER BY h.t_start, h.hop, h.instance
LIMIT 100
