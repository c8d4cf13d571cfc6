"""DCGM values one per (GPU, time, field) — exposition lines, Prometheus series, dcgmi dmon
cells — staged "long", then pivoted into gpu_samples rows by DuckDB (`gpu_finalize.sql`).

The pivot dedupes the same series scraped twice (two Prometheus jobs), gives clockless
samples their time and turns the DEV_PCIE_*_THROUGHPUT KB counters into rates.
"""

from __future__ import annotations

import polars as pl

from traceq.ingest.gpu.common import RANGES, Clock, quarantine_rows
from traceq.ingest.second_pass import GPU_PIVOT_MEMORY, second_pass
from traceq.sql import load
from traceq.writer import SourceWriter

# DCGM field (exporter name without `DCGM_FI_`, or dcgmi dmon short name) → staged column.
# `pcie_*_kb` are NVML KB counters, turned into pcie_*_nvml_bps by the pivot.
FIELDS: dict[str, str] = {
    "DEV_GPU_UTIL": "util_gpu",
    "DEV_MEM_COPY_UTIL": "util_mem",
    "DEV_ENC_UTIL": "util_enc",
    "DEV_DEC_UTIL": "util_dec",
    "DEV_FB_USED": "fb_used_mib",
    "DEV_FB_FREE": "fb_free_mib",
    "DEV_FB_TOTAL": "fb_total_mib",
    "DEV_FB_RESERVED": "fb_reserved_mib",
    "DEV_POWER_USAGE": "power_w",
    "DEV_GPU_TEMP": "temp_c",
    "DEV_MEMORY_TEMP": "mem_temp_c",
    "DEV_SM_CLOCK": "sm_clock_mhz",
    "DEV_MEM_CLOCK": "mem_clock_mhz",
    "DEV_PSTATE": "pstate",
    "DEV_TOTAL_ENERGY_CONSUMPTION": "energy_mj",
    "DEV_XID_ERRORS": "xid",
    "DEV_PCIE_TX_THROUGHPUT": "pcie_tx_kb",
    "DEV_PCIE_RX_THROUGHPUT": "pcie_rx_kb",
    "PROF_GR_ENGINE_ACTIVE": "gr_engine_active",
    "PROF_SM_ACTIVE": "sm_active",
    "PROF_SM_OCCUPANCY": "sm_occupancy",
    "PROF_PIPE_TENSOR_ACTIVE": "tensor_active",
    "PROF_DRAM_ACTIVE": "dram_active",
    "PROF_PIPE_FP64_ACTIVE": "fp64_active",
    "PROF_PIPE_FP32_ACTIVE": "fp32_active",
    "PROF_PIPE_FP16_ACTIVE": "fp16_active",
    "PROF_PCIE_TX_BYTES": "pcie_tx_bps",
    "PROF_PCIE_RX_BYTES": "pcie_rx_bps",
    "PROF_NVLINK_TX_BYTES": "nvlink_tx_bps",
    "PROF_NVLINK_RX_BYTES": "nvlink_rx_bps",
}
EXPORTER_FIELDS = {f"DCGM_FI_{k}": v for k, v in FIELDS.items()}
DMON_FIELDS: dict[str, str] = {
    "SMCLK": "sm_clock_mhz",
    "MMCLK": "mem_clock_mhz",
    "MMTMP": "mem_temp_c",
    "TMPTR": "temp_c",
    "POWER": "power_w",
    "TOTEC": "energy_mj",
    "PSTAT": "pstate",
    "TXTPT": "pcie_tx_kb",
    "RXTPT": "pcie_rx_kb",
    "GPUTL": "util_gpu",
    "MCUTL": "util_mem",
    "ECUTL": "util_enc",
    "DCUTL": "util_dec",
    "XIDER": "xid",
    "FBTTL": "fb_total_mib",
    "FBFRE": "fb_free_mib",
    "FBUSD": "fb_used_mib",
    "FBRSV": "fb_reserved_mib",
    "GRACT": "gr_engine_active",
    "SMACT": "sm_active",
    "SMOCC": "sm_occupancy",
    "TENSO": "tensor_active",
    "DRAMA": "dram_active",
    "FP64A": "fp64_active",
    "FP32A": "fp32_active",
    "FP16A": "fp16_active",
    "PCITX": "pcie_tx_bps",
    "PCIRX": "pcie_rx_bps",
    "NVLTX": "nvlink_tx_bps",
    "NVLRX": "nvlink_rx_bps",
}

LONG_SCHEMA = pl.Schema(
    {
        "ts": pl.Int64(),
        "_k": pl.Int64(),
        "entity": pl.String(),
        "host": pl.String(),
        "gpu": pl.Int64(),
        "uuid": pl.String(),
        "pci_bus_id": pl.String(),
        "model_name": pl.String(),
        "driver_version": pl.String(),
        "mig_profile": pl.String(),
        "mig_instance": pl.Int64(),
        "pod": pl.String(),
        "namespace": pl.String(),
        "container": pl.String(),
        "col": pl.String(),
        "col_bit": pl.Int8(),
        "value": pl.Float64(),
    }
)
# Bit of each staged column in the pivot's duplicate count (< 63 columns).
COLUMN_BITS = {c: i for i, c in enumerate(sorted(set(FIELDS.values())))}
STAGE = "gpu_long"
_RANGES = pl.DataFrame(
    {
        "col": list(RANGES),
        "_lo": [lo for lo, _ in RANGES.values()],
        "_hi": [hi for _, hi in RANGES.values()],
    }
)


def check_and_stage(writer: SourceWriter, frame: pl.DataFrame) -> int:
    """Quarantine non-finite and out-of-range values (kept as null), stage the rest.

    `frame` has LONG_SCHEMA's columns plus `lineno` and `line`; returns the NaN count.
    """
    frame = frame.join(_RANGES, on="col", how="left")
    v = pl.col("value")
    nan = v.is_nan()
    inf = v.is_infinite()
    outside = v.is_not_nan() & ~inf & ~v.is_between(pl.col("_lo"), pl.col("_hi")).fill_null(True)
    flagged = frame.filter(inf | outside)
    if flagged.height:
        reason = pl.format("value out of range: {}={} outside [{}, {}]", "col", v, "_lo", "_hi")
        writer.write("quarantine", quarantine_rows(flagged, reason))
    n_nan = frame.select(nan.sum()).item()
    frame = frame.with_columns(
        value=pl.when(nan | inf | outside).then(None).otherwise(v),
        col_bit=pl.col("col").replace_strict(COLUMN_BITS, return_dtype=pl.Int8),
    )
    writer.write_scratch(STAGE, frame.select([pl.col(c).cast(t) for c, t in LONG_SCHEMA.items()]))
    return int(n_nan)


def finalize(writer: SourceWriter, clock: Clock) -> dict[str, int]:
    """Pivot the staged values into gpu_samples rows; returns counts for the manifest."""
    writer.close(STAGE)
    path = writer.scratch_path(STAGE)
    if not path.exists():
        return {"duplicate_values": 0, "clockless_values": 0}
    with second_pass(writer, GPU_PIVOT_MEMORY) as con:  # beyond it, DuckDB spills to disk
        con.read_parquet(str(path)).create_view(STAGE)
        no_time = pl.scan_parquet(path).filter(pl.col("ts").is_null())
        last_k = no_time.select(pl.col("_k").max()).collect().item() or 0
        anchor = clock.anchor(last_k)
        params = pl.DataFrame({"anchor_ns": [anchor], "interval_ns": [clock.interval_ns]})
        con.register("gpu_params", params)
        con.execute(load("gpu_finalize"))
        for batch in con.table("gpu_out").to_arrow_reader(1 << 18):
            writer.write("gpu_samples", pl.from_arrow(batch))  # type: ignore[arg-type]
        clockless, dups = con.table("gpu_stats").fetchall()[0]
    return {"duplicate_values": int(dups), "clockless_values": int(clockless)}
