-- App timeline: GPU series per window of $bucket_ns in [$since, $until), averaged over every
-- GPU sample in the window (gpu_state: nvidia-smi and DCGM samples of one GPU form one series).
-- Activities as ratios 0-1 (util_gpu / 100 where no DCGM SM activity exists), W, MHz.
SELECT
    ts // $bucket_ns * $bucket_ns AS ts,
    avg(coalesce(sm_active, util_gpu / 100.0)) AS sm_active,
    avg(coalesce(dram_active, util_mem / 100.0)) AS dram_active,
    avg(power_w) AS power_w,
    avg(sm_clock_mhz) AS sm_clock_mhz,
    max(fb_used_mib) AS fb_used_mib,
    count(DISTINCT gpu_key) AS gpus
FROM gpu_state
WHERE ts >= $since AND ts < $until
GROUP BY 1
ORDER BY 1
