-- Second pass of the DCGM readers (traceq/ingest/gpu/long.py): staged values, one per
-- (GPU, time, field), become one gpu_samples row per GPU and time.
-- Inputs: gpu_long (the staged values) and gpu_params (anchor_ns, interval_ns: the clock of
-- values without a time, sample k at anchor_ns + k * interval_ns).

-- Every value with its time.
CREATE OR REPLACE TEMP VIEW gpu_long_timed AS
SELECT
    coalesce(l.ts, p.anchor_ns + l._k * p.interval_ns) AS ts,
    l.* EXCLUDE (ts, _k)
FROM gpu_long AS l
CROSS JOIN gpu_params AS p;

-- One row per GPU entity and time. The same series twice (scraped by two Prometheus jobs,
-- which differ only in job / instance labels) collapses into one value; n_values - n_columns
-- counts the duplicates. Labels that only some series carry (pod, err_code) are merged.
CREATE OR REPLACE TEMP TABLE gpu_wide AS
SELECT
    ts,
    entity,
    host,
    gpu,
    uuid,
    mig_instance,
    max(pci_bus_id) AS pci_bus_id,
    max(model_name) AS model_name,
    max(driver_version) AS driver_version,
    max(mig_profile) AS mig_profile,
    max(pod) AS pod,
    max(namespace) AS namespace,
    max(container) AS container,
    max(value) FILTER (WHERE col = 'util_gpu') AS util_gpu,
    max(value) FILTER (WHERE col = 'util_mem') AS util_mem,
    max(value) FILTER (WHERE col = 'util_enc') AS util_enc,
    max(value) FILTER (WHERE col = 'util_dec') AS util_dec,
    max(value) FILTER (WHERE col = 'fb_used_mib') AS fb_used_mib,
    max(value) FILTER (WHERE col = 'fb_free_mib') AS fb_free_mib,
    max(value) FILTER (WHERE col = 'fb_total_mib') AS fb_total_mib,
    max(value) FILTER (WHERE col = 'fb_reserved_mib') AS fb_reserved_mib,
    max(value) FILTER (WHERE col = 'power_w') AS power_w,
    max(value) FILTER (WHERE col = 'temp_c') AS temp_c,
    max(value) FILTER (WHERE col = 'mem_temp_c') AS mem_temp_c,
    max(value) FILTER (WHERE col = 'sm_clock_mhz') AS sm_clock_mhz,
    max(value) FILTER (WHERE col = 'mem_clock_mhz') AS mem_clock_mhz,
    max(value) FILTER (WHERE col = 'pstate') AS pstate,
    max(value) FILTER (WHERE col = 'energy_mj') AS energy_mj,
    max(value) FILTER (WHERE col = 'xid') AS xid,
    max(value) FILTER (WHERE col = 'pcie_tx_kb') AS pcie_tx_kb,
    max(value) FILTER (WHERE col = 'pcie_rx_kb') AS pcie_rx_kb,
    max(value) FILTER (WHERE col = 'gr_engine_active') AS gr_engine_active,
    max(value) FILTER (WHERE col = 'sm_active') AS sm_active,
    max(value) FILTER (WHERE col = 'sm_occupancy') AS sm_occupancy,
    max(value) FILTER (WHERE col = 'tensor_active') AS tensor_active,
    max(value) FILTER (WHERE col = 'dram_active') AS dram_active,
    max(value) FILTER (WHERE col = 'fp64_active') AS fp64_active,
    max(value) FILTER (WHERE col = 'fp32_active') AS fp32_active,
    max(value) FILTER (WHERE col = 'fp16_active') AS fp16_active,
    max(value) FILTER (WHERE col = 'pcie_tx_bps') AS pcie_tx_bps,
    max(value) FILTER (WHERE col = 'pcie_rx_bps') AS pcie_rx_bps,
    max(value) FILTER (WHERE col = 'nvlink_tx_bps') AS nvlink_tx_bps,
    max(value) FILTER (WHERE col = 'nvlink_rx_bps') AS nvlink_rx_bps,
    count(*) AS n_values,
    -- distinct fields as a bit set: count(DISTINCT col) cannot spill to disk
    bit_count(bit_or(CAST(1 AS BIGINT) << col_bit)) AS n_columns
FROM gpu_long_timed
GROUP BY ts, entity, host, gpu, uuid, mig_instance;

-- gpu_samples rows. DEV_PCIE_*_THROUGHPUT are KB counters: the rate is the increase since the
-- previous sample of the same GPU, times 1024, over the time between them; null on a GPU's
-- first sample and after a counter reset.
CREATE OR REPLACE TEMP VIEW gpu_out AS
SELECT
    * EXCLUDE (pcie_tx_kb, pcie_rx_kb, n_values, n_columns),
    CASE
        WHEN pcie_tx_kb >= lag(pcie_tx_kb) OVER w AND ts > lag(ts) OVER w
            THEN (pcie_tx_kb - lag(pcie_tx_kb) OVER w) * 1024 / ((ts - lag(ts) OVER w) / 1e9)
    END AS pcie_tx_nvml_bps,
    CASE
        WHEN pcie_rx_kb >= lag(pcie_rx_kb) OVER w AND ts > lag(ts) OVER w
            THEN (pcie_rx_kb - lag(pcie_rx_kb) OVER w) * 1024 / ((ts - lag(ts) OVER w) / 1e9)
    END AS pcie_rx_nvml_bps
FROM gpu_wide
WINDOW w AS (PARTITION BY entity, host, gpu, uuid, mig_instance ORDER BY ts);

-- Counts for the manifest: values without a time of their own, and duplicate values.
CREATE OR REPLACE TEMP VIEW gpu_stats AS
SELECT
    (SELECT count(*) FROM gpu_long WHERE ts IS NULL) AS clockless_values,
    (SELECT coalesce(sum(n_values - n_columns), 0) FROM gpu_wide) AS duplicate_values;
