-- Public views over stitched requests (traceq/sql/otel_stitched.sql writes request_hops,
-- clock_offsets and unserved per source; docs/INGEST.md "One request across every hop").

-- Whether this dataset pairs client rows with server rows at all: only then is a client row
-- with no server row a request that never reached a server (a load test read alone pairs
-- nothing, and its rows are not lost).
CREATE OR REPLACE VIEW _client_pairing AS
SELECT
    EXISTS (
        SELECT 1
        FROM unserved AS u
        SEMI JOIN requests AS r ON r.trace_id = u.trace_id AND r.view = 'server'
        WHERE u.hop = 'client'
    ) AS traces_pair,
    EXISTS (
        SELECT 1
        FROM _request_pick AS c
        SEMI JOIN _request_pick AS s ON s.request_id = c.request_id AND s.view = 'server'
        WHERE c.view = 'client'
    ) AS ids_pair;

-- @view lost_requests
-- Requests some layer saw and no engine served: a gateway, router or sidecar span whose trace
-- no engine of any source answered, a client span whose trace no server saw, and a client
-- or load-test row (without a trace) no server row answers. A client-only candidate counts
-- when it failed or when the dataset pairs client and server rows (_client_pairing). One row
-- per request; request_phases has the served ones.
CREATE OR REPLACE VIEW lost_requests AS
WITH served AS (
    SELECT DISTINCT trace_id FROM requests WHERE view = 'server' AND trace_id IS NOT NULL
),
candidates AS (
    SELECT u.request_id, u.trace_id, u.ids, u.hop, u.instance, u.error, u.ts, u.source_id
    FROM unserved AS u
    ANTI JOIN served AS s ON s.trace_id = u.trace_id
    WHERE u.hop <> 'client' OR u.error IS NOT NULL OR (SELECT traces_pair FROM _client_pairing)
    UNION ALL
    SELECT
        p.request_id, NULL, p.request_id, 'client', p.instance, p.error, p.t_arrival,
        p.source_id
    FROM _request_pick AS p
    WHERE p.is_primary AND p.view = 'client' AND p.trace_id IS NULL
        AND (SELECT ids_pair FROM _client_pairing)
)
SELECT
    -- The best id known (the caller's x-request-id first).
    request_id,
    -- Trace id (hex); null for a load-test row.
    trace_id,
    -- Every id any layer gave the request, comma-separated.
    ids,
    -- The last hop that saw it: client, gateway, router, proxy or worker.
    hop,
    -- Instance of that hop.
    instance,
    -- error.type or status message of the deepest failing span (the load tool's error).
    error,
    -- When the first hop saw it, ns since the Unix epoch (UTC), on the reference clock.
    ts,
    -- ts as a timestamp (UTC, ns precision).
    make_timestamp_ns(ts) AS ts_at,
    -- Source file the row came from.
    source_id
FROM candidates;

-- Internal (not a public view): the lost requests request_phases does not already hold (a
-- client row that stands for its request is in both), each as a failure at the time its first
-- hop saw it, with its error or what became of it. error-rate counts them with the served
-- requests' failures.
CREATE OR REPLACE VIEW _unserved_failures AS
SELECT
    l.request_id,
    l.ts,
    coalesce(l.error, 'not served (last hop: ' || l.hop || ')') AS error
FROM lost_requests AS l
ANTI JOIN request_phases AS p ON p.request_id = l.request_id
WHERE l.trace_id IS NULL
    OR NOT EXISTS (SELECT 1 FROM request_phases AS q WHERE q.trace_id = l.trace_id);

-- @view routing
-- One row per routing decision of a routed or disaggregated request: Dynamo's route spans
-- (one per phase with the KV router), llm-d's EPP scheduling and its sidecar's calls to the
-- prefill and the decode worker; the worker chosen as the router names it, the prefix overlap
-- the KV router saw, and what became of the request (request_phases, lost_requests). Empty
-- for a dataset of engines read alone.
CREATE OR REPLACE VIEW routing AS
WITH decisions AS (
    SELECT
        h.*,
        CASE
            WHEN lower(h.detail) IN ('prefill', 'decode') THEN lower(h.detail)
            WHEN h.name = 'llm_d.pd_proxy.prefill' THEN 'prefill'
            WHEN h.name = 'llm_d.pd_proxy.decode' THEN 'decode'
        END AS phase
    FROM request_hops AS h
    WHERE h.hop = 'router' OR h.name IN ('llm_d.pd_proxy.prefill', 'llm_d.pd_proxy.decode')
)
SELECT
    -- The stitched request (request_phases.request_id, else lost_requests.request_id).
    d.request_id,
    -- Trace id (hex).
    d.trace_id,
    -- When the decision began, ns since the Unix epoch (UTC), on the reference clock.
    d.t_start AS ts,
    -- Time the decision took (ms); a decision ends at the latest when its worker received the request.
    d.dur_ms,
    -- Instance that decided (the router, EPP or sidecar).
    d.instance AS router,
    -- Span of the decision.
    d.name,
    -- prefill or decode (Dynamo's KV router decides once for each, llm-d's sidecar calls
    -- each); null for a decision for the whole request.
    d.phase,
    -- The worker chosen, as the router names it (Dynamo worker_id, llm-d target address).
    d.worker,
    -- Dynamo KV router: the prompt's KV blocks the chosen worker already held.
    d.overlap_blocks,
    -- The engine instance that served the decided phase (request_phases).
    CASE d.phase
        WHEN 'prefill' THEN p.prefill_instance
        WHEN 'decode' THEN p.decode_instance
        ELSE coalesce(p.decode_instance, p.instance)
    END AS served_by,
    -- Queueing on the worker of the decided phase (ms): queue_ms for prefill (or a whole
    -- request), decode_queue_ms for decode.
    CASE d.phase WHEN 'decode' THEN p.decode_queue_ms ELSE p.queue_ms END AS queue_ms,
    -- The request's prefill time (ms).
    p.prefill_ms,
    -- Prompt tokens served from the prefix cache.
    p.cached_tokens,
    -- The request's TTFT (ms).
    p.ttft_ms,
    -- served, failed (served with an error) or lost (no engine served it: lost_requests).
    CASE
        WHEN p.request_id IS NULL THEN 'lost'
        WHEN p.error IS NOT NULL THEN 'failed'
        ELSE 'served'
    END AS outcome
FROM decisions AS d
LEFT JOIN request_phases AS p ON p.request_id = d.request_id AND p.view = 'server';

-- Internal (not a public view): every request any layer saw, served or not, at its arrival,
-- with its error (a lost request's error, or what became of it) and finish reason; what
-- error-rate counts.
CREATE OR REPLACE VIEW _request_outcomes AS
SELECT t_arrival AS ts, error, finish_reason FROM request_phases
UNION ALL
SELECT ts, error, NULL FROM _unserved_failures;

-- Internal (not a public view): each served request with the worker whose queue it waited in
-- (the prefill worker of a disaggregated request, else its instance), for requests whose
-- dataset names one; routing-skew compares the workers.
CREATE OR REPLACE VIEW _request_worker AS
SELECT p.*, coalesce(p.prefill_instance, p.instance) AS worker
FROM request_phases AS p
WHERE coalesce(p.prefill_instance, p.instance) <> '';

-- Internal (not a public view): the workers with a queued request, one row; a fleet of fewer
-- than two has nothing to route.
CREATE OR REPLACE VIEW _fleet AS
SELECT count(DISTINCT worker) AS workers FROM _request_worker WHERE queue_ms IS NOT NULL;
