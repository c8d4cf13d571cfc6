"""Shared pieces of the GPU telemetry readers: block-wise line reading, value ranges,
quarantine rows, and the clock of sources that print none.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

import polars as pl
import pyarrow.parquet as pq

from traceq.ingest.blocks import iter_line_blocks
from traceq.ingest.source import Source
from traceq.schema import RAW_LIMIT, conform
from traceq.writer import SourceWriter

BLOCK_BYTES = 16 << 20  # input read per block: bounds memory whatever the file size
NS_PER_S = 1_000_000_000
DEFAULT_INTERVAL_S = 1.0  # nvidia-smi dmon -d and dcgmi dmon -d default to one second

# Plausible ranges per gpu_samples column (inclusive). A value outside is a broken sample:
# the value becomes null and the record is quarantined with the reason.
PERCENT = (0.0, 100.0)
RATIO = (0.0, 1.0)
RANGES: dict[str, tuple[float, float]] = {
    "util_gpu": PERCENT,
    "util_mem": PERCENT,
    "util_enc": PERCENT,
    "util_dec": PERCENT,
    "util_jpg": PERCENT,
    "util_ofa": PERCENT,
    "sm_active": RATIO,
    "sm_occupancy": RATIO,
    "tensor_active": RATIO,
    "dram_active": RATIO,
    "gr_engine_active": RATIO,
    "fp64_active": RATIO,
    "fp32_active": RATIO,
    "fp16_active": RATIO,
    "fb_used_mib": (0.0, 1e8),
    "fb_total_mib": (0.0, 1e8),
    "fb_free_mib": (0.0, 1e8),
    "fb_reserved_mib": (0.0, 1e8),
    "power_w": (0.0, 1e5),
    "temp_c": (-60.0, 200.0),
    "mem_temp_c": (-60.0, 200.0),
    "sm_clock_mhz": (0.0, 1e5),
    "mem_clock_mhz": (0.0, 1e5),
    "pcie_tx_bps": (0.0, 1e13),
    "pcie_rx_bps": (0.0, 1e13),
    "nvlink_tx_bps": (0.0, 1e13),
    "nvlink_rx_bps": (0.0, 1e13),
    "pcie_tx_nvml_bps": (0.0, 1e13),
    "pcie_rx_nvml_bps": (0.0, 1e13),
}

# Values that mean "no value": nvidia-smi `[N/A]`, `[Not Supported]`, old `N/A`, dmon `-`, NaN.
NULL_TOKENS = (
    r"(?i)^\s*(?:\[?(?:N/A|Not Supported|Unknown Error|Insufficient Permissions|GPU is lost)\]?"
    r"|-|NaN|)\s*$"
)


def iter_blocks(
    stream: BinaryIO, progress: Callable[[int], None], block_bytes: int = BLOCK_BYTES
) -> Iterator[pl.DataFrame]:
    """Frames of (`lineno`, `line`) over the decompressed stream, cut at line ends.

    Lines are split by one `str.split` per block, never by a Python loop over lines.
    """
    for body, first in iter_line_blocks(stream, progress, block_bytes):
        text = body.decode("utf-8", "replace")
        if text.endswith("\n"):
            text = text[:-1]
        # str.split is one C call; polars then holds the lines as one Arrow column
        lines = pl.Series("line", text.split("\n")).str.strip_suffix("\r")
        frame = pl.DataFrame({"line": lines}).with_row_index("lineno", offset=first)
        yield frame.with_columns(pl.col("lineno").cast(pl.Int64))


def quarantine_rows(frame: pl.DataFrame, reason: str | pl.Expr) -> pl.DataFrame:
    """Quarantine rows for the (`lineno`, `line`) rows of `frame`."""
    reason_expr = pl.lit(reason) if isinstance(reason, str) else reason
    location = pl.lit("line ") + pl.col("lineno").cast(pl.String)
    if "location" in frame.columns:  # sources without lines (JSON) name their own place
        location = pl.coalesce(pl.col("location"), location)
    return frame.select(
        location=location,
        reason=reason_expr,
        raw=pl.col("line").str.slice(0, RAW_LIMIT),
    )


def range_check(frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Null out-of-range values of a wide frame; returns (frame, quarantine rows).

    The frame needs `lineno` and `line` for the quarantine rows.
    """
    cols = [c for c in RANGES if c in frame.columns]
    if not cols:
        return frame, pl.DataFrame()
    frame = frame.with_columns(pl.col(cols).fill_nan(None))  # NaN means no value
    bad = {c: ~pl.col(c).is_between(*RANGES[c]) for c in cols}
    reason = pl.concat_str(
        [
            pl.when(bad[c]).then(
                pl.lit(f"{c}=")
                + pl.col(c).cast(pl.String)
                + pl.lit(" outside [{}, {}]".format(*RANGES[c]))
            )
            for c in cols
        ],
        separator="; ",
        ignore_nulls=True,
    )
    flagged = frame.filter(pl.any_horizontal(list(bad.values())))
    if not flagged.height:
        return frame, flagged
    quarantine = quarantine_rows(flagged, pl.lit("value out of range: ") + reason)
    cleaned = frame.with_columns(
        pl.when(bad[c]).then(None).otherwise(pl.col(c)).alias(c) for c in cols
    )
    return cleaned, quarantine


def local_to_ns(expr: pl.Expr, tz: str) -> pl.Expr:
    """A naive datetime expression in time zone `tz` → int64 ns since the epoch (UTC)."""
    return (
        expr.dt.cast_time_unit("ns")
        .dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
        .dt.epoch("ns")
    )


@dataclass(frozen=True)
class Clock:
    """How sources without timestamps are placed in time (sample k of a GPU at k × interval)."""

    start_ns: int | None
    end_ns: int
    interval_ns: int
    assumptions: dict

    def anchor(self, last_k: int) -> int:
        """Time of sample 0: `--start`, else the file mtime taken as the last sample's time."""
        if self.start_ns is not None:
            return self.start_ns
        return self.end_ns - last_k * self.interval_ns


def clock_for(source: Source, start_ns: int | None, interval_s: float | None) -> Clock:
    """The clock of a clockless source from `--start` / `--interval` or the file's mtime."""
    interval = interval_s if interval_s and interval_s > 0 else DEFAULT_INTERVAL_S
    mtime_ns = os.stat(source.path).st_mtime_ns
    assumptions: dict = {
        "interval_s": interval,
        "interval_from": "--interval" if interval_s else "tool default (1 s)",
    }
    if start_ns is not None:
        assumptions["start_ns"] = start_ns
        assumptions["start_from"] = "--start"
    else:
        assumptions["end_ns"] = mtime_ns
        assumptions["start_from"] = "file mtime taken as the time of the last sample"
    return Clock(start_ns, mtime_ns, round(interval * NS_PER_S), assumptions)


def parse_iso_ns(expr: pl.Expr, tz: str) -> pl.Expr:
    """ISO-8601-ish text (`2025-01-02T03:04:05.6Z`, `… +02:00`, naive = `tz`) or epoch
    digits (s, ms, µs, ns by length) → int64 ns since the epoch."""
    text = (
        expr.str.strip_chars()
        .str.replace("T", " ", literal=True)
        .str.replace(",", ".", literal=True)
        .str.replace(r"\s*(?:Z|UTC)$", "+00:00")
        .str.replace(r"\s+([+-]\d{2}:?\d{2})$", "$1")
    )
    aware = text.str.to_datetime("%Y-%m-%d %H:%M:%S%.f%z", strict=False, time_unit="ns")
    naive = text.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="ns")
    digits = text.str.extract(r"^(\d{10}(?:\.\d+)?|\d{13}|\d{16}|\d{19})$", 1)
    n = digits.str.len_chars()
    epoch = (
        pl.when(digits.str.contains(r"\."))
        .then((digits.cast(pl.Float64) * 1e3).round().cast(pl.Int64) * 1_000_000)
        .when(n == 10)
        .then(digits.cast(pl.Int64) * NS_PER_S)
        .when(n == 13)
        .then(digits.cast(pl.Int64) * 1_000_000)
        .when(n == 16)
        .then(digits.cast(pl.Int64) * 1_000)
        .otherwise(digits.cast(pl.Int64, strict=False))
    )
    return pl.coalesce(aware.dt.epoch("ns"), local_to_ns(naive, tz), epoch)


class SampleCounter:
    """Sample number `_k` of each row within its GPU (`keys`), continued across blocks.

    Sources without a clock print one row per GPU per interval, so the k-th row of a GPU is
    its k-th sample.
    """

    def __init__(self, keys: list[str]) -> None:
        self.keys = keys
        self.seen: pl.DataFrame | None = None

    def number(self, frame: pl.DataFrame) -> pl.DataFrame:
        frame = frame.with_columns(_k=pl.int_range(pl.len(), dtype=pl.Int64).over(self.keys))
        if self.seen is not None:
            frame = frame.join(self.seen, on=self.keys, how="left", nulls_equal=True)
            frame = frame.with_columns(pl.col("_k") + pl.col("_n").fill_null(0)).drop("_n")
        counts = frame.group_by(self.keys).agg(_n=pl.len().cast(pl.Int64))
        if self.seen is not None:
            counts = pl.concat([self.seen, counts]).group_by(self.keys).agg(pl.col("_n").sum())
        self.seen = counts
        return frame


CLOCKLESS = "gpu_clockless"  # scratch table of samples waiting for their time


def stage_clockless(writer: SourceWriter, frame: pl.DataFrame) -> None:
    """Keep wide samples numbered `_k` (no time yet) until the last sample number is known."""
    staged = conform("gpu_samples", frame.drop("_k")).with_columns(frame["_k"])
    writer.write_scratch(CLOCKLESS, staged)


def finish_clockless(writer: SourceWriter, clock: Clock) -> None:
    """Give staged clockless samples their time: anchor + k × interval."""
    writer.close(CLOCKLESS)
    path = writer.scratch_path(CLOCKLESS)
    if not path.exists():
        return
    last_k = pl.scan_parquet(path).select(pl.col("_k").max()).collect().item()
    anchor = clock.anchor(last_k)
    for batch in pq.ParquetFile(path).iter_batches(1 << 20):
        frame = pl.from_arrow(batch)
        assert isinstance(frame, pl.DataFrame)
        ts = pl.lit(anchor, pl.Int64) + pl.col("_k") * clock.interval_ns
        writer.write("gpu_samples", frame.with_columns(ts=ts).drop("_k", "source_id"))


def join_reasons(reasons: list[pl.Expr]) -> pl.Expr:
    """`"; "`-joined non-null reasons, null when there are none."""
    if not reasons:
        return pl.lit(None, pl.String)
    text = pl.concat_str(reasons, separator="; ", ignore_nulls=True)
    return pl.when(text != "").then(text)
