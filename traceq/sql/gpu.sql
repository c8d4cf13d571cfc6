-- GPU state aligned with time windows and requests (docs/METRICS.md). Units as in gpu_samples:
-- utilisation in percent, PROF_* activities as ratios 0-1, MiB, W, MHz, bytes/s.
-- Every view works on a dataset without gpu_samples or without requests (it is then empty).

-- @view gpu_state
-- One row per GPU sample with the interval it stands for: from its own time to the next
-- sample of the same GPU (the last sample of a GPU lasts as long as the gap before it, or
-- 1 s when it is alone). A sample without a host (nvidia-smi prints none) takes the host
-- another source names for the same GPU UUID, so nvidia-smi and DCGM samples of one GPU form
-- one series. The as-of building block of the other GPU views.
CREATE OR REPLACE VIEW gpu_state AS
WITH hosted AS (
    SELECT
        * EXCLUDE (host, entity),
        coalesce(
            host, CASE WHEN uuid IS NOT NULL THEN max(host) OVER (PARTITION BY uuid) END
        ) AS host,
        coalesce(entity, 'GPU') AS entity
    FROM gpu_samples
),
ordered AS (
    SELECT
        *,
        lead(ts) OVER w AS ts_next,
        ts - lag(ts) OVER w AS gap_before
    FROM hosted
    WINDOW w AS (
        PARTITION BY host, coalesce(uuid, ''), gpu, entity, mig_instance ORDER BY ts
    )
)
SELECT
    -- Host name of the GPU (null when the source names none).
    host,
    -- GPU key: UUID when known, else host:index; MIG instances add /GPU-I id.
    coalesce(uuid, coalesce(host, '') || ':' || coalesce(CAST(gpu AS VARCHAR), '?'))
    || CASE WHEN mig_instance IS NOT NULL THEN '/' || entity || ' '
        || CAST(mig_instance AS VARCHAR) ELSE '' END AS gpu_key,
    -- GPU index on the host.
    gpu,
    -- Sample time, ns since the Unix epoch (UTC).
    ts,
    -- End of the interval the sample stands for (ns).
    coalesce(ts_next, ts + coalesce(gap_before, 1000000000)) AS ts_end,
    -- GPU utilisation (%).
    util_gpu,
    -- Memory-controller utilisation (%).
    util_mem,
    -- PROF_GR_ENGINE_ACTIVE (ratio 0-1).
    gr_engine_active,
    -- PROF_SM_ACTIVE (ratio 0-1).
    sm_active,
    -- PROF_SM_OCCUPANCY (ratio 0-1).
    sm_occupancy,
    -- PROF_PIPE_TENSOR_ACTIVE (ratio 0-1).
    tensor_active,
    -- PROF_DRAM_ACTIVE (ratio 0-1).
    dram_active,
    -- Power draw (W).
    power_w,
    -- GPU temperature (°C).
    temp_c,
    -- SM clock (MHz).
    sm_clock_mhz,
    -- Memory clock (MHz).
    mem_clock_mhz,
    -- Frame buffer in use (MiB).
    fb_used_mib,
    -- PCIe transmit rate, PROF counter incl. headers (bytes/s).
    pcie_tx_bps,
    -- PCIe receive rate, PROF counter incl. headers (bytes/s).
    pcie_rx_bps,
    -- ts as a timestamp (UTC, ns precision).
    make_timestamp_ns(ts) AS ts_at
FROM ordered;

-- @view gpu_windows
-- GPU state per host and fixed time window of window_s = 10 s (windows aligned on multiples
-- of window_s since the epoch): means over every sample of every GPU of the host in the
-- window, and the number of GPUs seen. Feeds time-series charts and playbooks that compare
-- GPU activity with engine state.
CREATE OR REPLACE VIEW gpu_windows AS
WITH params AS (
    SELECT CAST(10 AS BIGINT) AS window_s
),
bucketed AS (
    SELECT
        s.*,
        s.ts // (p.window_s * 1000000000) * (p.window_s * 1000000000) AS w_start,
        p.window_s
    FROM gpu_state AS s
    CROSS JOIN params AS p
)
SELECT
    -- Host name.
    host,
    -- Window start, ns since the Unix epoch (UTC).
    w_start AS ts,
    -- Window end (ns).
    w_start + window_s * 1000000000 AS ts_end,
    -- GPUs with at least one sample in the window.
    count(DISTINCT gpu_key) AS n_gpus,
    -- Samples in the window (all GPUs).
    count(*) AS n_samples,
    -- Mean GPU utilisation (%).
    avg(util_gpu) AS util_gpu,
    -- Mean memory-controller utilisation (%).
    avg(util_mem) AS util_mem,
    -- Mean SM activity (ratio 0-1).
    avg(sm_active) AS sm_active,
    -- Mean tensor-pipe activity (ratio 0-1).
    avg(tensor_active) AS tensor_active,
    -- Mean DRAM activity (ratio 0-1).
    avg(dram_active) AS dram_active,
    -- Mean power per GPU (W).
    avg(power_w) AS power_w,
    -- Mean SM clock (MHz).
    avg(sm_clock_mhz) AS sm_clock_mhz,
    -- Lowest SM clock seen (MHz): a throttling dip shows here.
    min(sm_clock_mhz) AS sm_clock_min_mhz,
    -- Highest frame-buffer use of any GPU (MiB).
    max(fb_used_mib) AS fb_used_max_mib,
    -- Window start as a timestamp (UTC, ns precision).
    make_timestamp_ns(w_start) AS ts_at
FROM bucketed
GROUP BY host, w_start, window_s;

-- @view request_gpu
-- GPU state during each request's decode (t_first_token to t_last_token, from
-- request_phases): every sample whose interval (gpu_state) overlaps the decode, on the GPUs of
-- the request's host. A request's instance matches gpu_samples.host; when it names no host
-- that has GPU samples and the samples come from a single host (or none is named), that
-- host's GPUs are used. Requests without a decode window or without overlapping samples get
-- null figures.
CREATE OR REPLACE VIEW request_gpu AS
WITH hosts AS (
    -- The overlap test is an equality join on (host, time bucket), not a range join of
    -- every request with every sample: both sides are cut into buckets of about one sample
    -- interval (decodes into the buckets they cover, samples into the buckets their interval
    -- covers), and each (request, sample) pair is kept in the one bucket that holds the start
    -- of its overlap, greatest(ts, t_first_token), so it is counted once. The pairs kept are
    -- exactly those of `ts <= t_last_token AND ts_end > t_first_token`
    -- (tests/test_gpu_align.py compares them with that range join).
    SELECT
        count(DISTINCT coalesce(host, '')) AS n_hosts,
        list(DISTINCT host) AS names,
        -- bucket width: the median sample interval, at least 1 ms
        greatest(CAST(quantile_disc(ts_end - ts, 0.5) AS BIGINT), 1000000) AS bucket_ns
    FROM gpu_state
),
decodes AS (
    SELECT
        r.request_id,
        r.source_id,
        r.instance,
        r.t_arrival + r.ttft_ns AS t_first_token,
        r.t_arrival + r.e2e_ns AS t_last_token,
        r.decode_ns
    FROM request_phases AS r
),
-- each decode with the buckets it covers and the samples it may match: those of its host
-- (any_host false, host_key its instance), or every sample when there is one host and the
-- instance names none with samples (any_host true)
decode_buckets AS (
    SELECT
        d.request_id,
        d.source_id,
        d.t_first_token,
        d.t_last_token,
        h.n_hosts = 1 AND NOT coalesce(list_contains(h.names, d.instance), false) AS any_host,
        CASE WHEN any_host THEN '' ELSE d.instance END AS host_key,
        unnest(
            range(
                d.t_first_token // h.bucket_ns,
                greatest(d.t_first_token, d.t_last_token) // h.bucket_ns + 1
            )
        ) AS bucket,
        h.bucket_ns
    FROM decodes AS d
    CROSS JOIN hosts AS h
    WHERE d.t_first_token IS NOT NULL AND d.t_last_token IS NOT NULL AND h.n_hosts > 0
),
-- each sample under its own host, and once more for any host when there is one host
sample_hosts AS (
    SELECT *, false AS any_host, host AS host_key FROM gpu_state
    UNION ALL
    SELECT g.*, true AS any_host, '' AS host_key
    FROM gpu_state AS g
    CROSS JOIN hosts AS h
    WHERE h.n_hosts = 1
),
sample_buckets AS (
    SELECT
        g.*,
        unnest(
            range(g.ts // h.bucket_ns, greatest(g.ts, g.ts_end - 1) // h.bucket_ns + 1)
        ) AS bucket
    FROM sample_hosts AS g
    CROSS JOIN hosts AS h
),
matched AS (
    SELECT
        d.request_id,
        d.source_id,
        g.*
    FROM decode_buckets AS d
    JOIN sample_buckets AS g
        ON g.any_host = d.any_host
        AND g.host_key = d.host_key
        AND g.bucket = d.bucket
        AND g.ts <= d.t_last_token
        AND g.ts_end > d.t_first_token
        AND greatest(g.ts, d.t_first_token) // d.bucket_ns = d.bucket
),
per_request AS (
    SELECT
        request_id,
        source_id,
        count(*) AS n_samples,
        count(DISTINCT gpu_key) AS n_gpus,
        avg(util_gpu) AS util_gpu,
        avg(sm_active) AS sm_active,
        avg(tensor_active) AS tensor_active,
        avg(dram_active) AS dram_active,
        avg(power_w) AS power_w,
        avg(sm_clock_mhz) AS sm_clock_mhz,
        avg(mem_clock_mhz) AS mem_clock_mhz,
        max(fb_used_mib) AS fb_used_max_mib
    FROM matched
    GROUP BY request_id, source_id
)
SELECT
    -- Request id (request_phases.request_id).
    d.request_id AS request_id,
    -- Source file of the request row.
    d.source_id AS source_id,
    -- Serving instance of the request.
    d.instance AS instance,
    -- Decode start = first token, ns since the Unix epoch (UTC).
    d.t_first_token AS t_first_token,
    -- Decode end = last token (ns).
    d.t_last_token AS t_last_token,
    -- Decode duration (ms).
    d.decode_ns / 1e6 AS decode_ms,
    -- GPU samples overlapping the decode (all matched GPUs).
    coalesce(p.n_samples, 0) AS n_gpu_samples,
    -- GPUs matched.
    coalesce(p.n_gpus, 0) AS n_gpus,
    -- Mean GPU utilisation during decode (%).
    p.util_gpu AS util_gpu,
    -- Mean SM activity during decode (ratio 0-1).
    p.sm_active AS sm_active,
    -- Mean tensor-pipe activity during decode (ratio 0-1).
    p.tensor_active AS tensor_active,
    -- Mean DRAM activity during decode (ratio 0-1).
    p.dram_active AS dram_active,
    -- Mean power per GPU during decode (W).
    p.power_w AS power_w,
    -- Mean SM clock during decode (MHz).
    p.sm_clock_mhz AS sm_clock_mhz,
    -- Mean memory clock during decode (MHz).
    p.mem_clock_mhz AS mem_clock_mhz,
    -- Highest frame-buffer use during decode (MiB).
    p.fb_used_max_mib AS fb_used_max_mib,
    -- t_first_token as a timestamp (UTC, ns precision).
    make_timestamp_ns(d.t_first_token) AS first_token_at,
    -- t_last_token as a timestamp (UTC, ns precision).
    make_timestamp_ns(d.t_last_token) AS last_token_at
FROM decodes AS d
LEFT JOIN per_request AS p
    ON p.request_id = d.request_id AND p.source_id IS NOT DISTINCT FROM d.source_id;

-- @view engine_gpu
-- Each engine_stats sample with the GPU state in force at its time: the samples of the
-- instance's GPUs whose interval (gpu_state) contains engine_stats.ts, averaged over the
-- GPUs. Host matching as in request_gpu. Answers "was the GPU busy while requests waited?".
CREATE OR REPLACE VIEW engine_gpu AS
WITH hosts AS (
    SELECT count(DISTINCT coalesce(host, '')) AS n_hosts, list(DISTINCT host) AS names
    FROM gpu_state
),
moments AS (
    -- GPU state depends only on the time and the instance
    SELECT DISTINCT ts, instance FROM engine_stats
),
matched AS (
    SELECT
        e.ts,
        e.instance,
        count(DISTINCT g.gpu_key) AS n_gpus,
        avg(g.util_gpu) AS util_gpu,
        avg(g.sm_active) AS sm_active,
        avg(g.tensor_active) AS tensor_active,
        avg(g.dram_active) AS dram_active,
        avg(g.power_w) AS power_w,
        avg(g.sm_clock_mhz) AS sm_clock_mhz
    FROM moments AS e
    CROSS JOIN hosts AS h
    JOIN gpu_state AS g
        ON g.ts <= e.ts
        AND g.ts_end > e.ts
        AND (
            g.host = e.instance
            OR (h.n_hosts = 1 AND NOT coalesce(list_contains(h.names, e.instance), false))
        )
    GROUP BY e.ts, e.instance
)
SELECT
    -- Time of the engine stats sample, ns since the Unix epoch (UTC).
    e.ts AS ts,
    -- Source file of the engine stats row.
    e.source_id AS source_id,
    -- Serving instance.
    e.instance AS instance,
    -- Engine index.
    e.engine AS engine,
    -- Requests running in the engine.
    e.running AS running,
    -- Requests waiting.
    e.waiting AS waiting,
    -- GPU KV-cache usage (ratio 0-1).
    e.kv_usage AS kv_usage,
    -- Generation throughput (tokens/s).
    e.gen_tps AS gen_tps,
    -- GPUs with a sample in force at ts.
    coalesce(m.n_gpus, 0) AS n_gpus,
    -- Mean GPU utilisation (%).
    m.util_gpu AS util_gpu,
    -- Mean SM activity (ratio 0-1).
    m.sm_active AS sm_active,
    -- Mean tensor-pipe activity (ratio 0-1).
    m.tensor_active AS tensor_active,
    -- Mean DRAM activity (ratio 0-1).
    m.dram_active AS dram_active,
    -- Mean power per GPU (W).
    m.power_w AS power_w,
    -- Mean SM clock (MHz).
    m.sm_clock_mhz AS sm_clock_mhz,
    -- ts as a timestamp (UTC, ns precision).
    make_timestamp_ns(e.ts) AS ts_at
FROM engine_stats AS e
LEFT JOIN matched AS m ON m.ts = e.ts AND m.instance IS NOT DISTINCT FROM e.instance;
