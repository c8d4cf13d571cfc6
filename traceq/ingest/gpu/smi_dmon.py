"""`nvidia-smi dmon` text → gpu_samples.

Two `#` header lines (names, units) that dmon re-prints in long runs; whitespace-separated,
right-aligned columns; `-` for a missing value. Any `-s` selection, the old `temp` and the new
`gtemp mtemp` layouts, `jpg ofa`. With `-o DT` the `#Date Time` columns give host-local time
(`--tz`); without them sample k of a GPU is at start + k × interval (`--start`, `--interval`,
else the file mtime as the last sample).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import polars as pl

from traceq.ingest.gpu.common import (
    NULL_TOKENS,
    SampleCounter,
    clock_for,
    finish_clockless,
    iter_blocks,
    join_reasons,
    local_to_ns,
    quarantine_rows,
    range_check,
    stage_clockless,
)
from traceq.ingest.options import IngestOptions
from traceq.ingest.source import Source
from traceq.writer import SourceWriter

MIB = float(1 << 20)  # dmon's MB are MiB (fb matches nvidia-smi's MiB figures)
# dmon column → (gpu_samples column, factor to its unit).
COLUMNS: dict[str, tuple[str, float]] = {
    "gpu": ("gpu", 1.0),
    "pwr": ("power_w", 1.0),
    "temp": ("temp_c", 1.0),
    "gtemp": ("temp_c", 1.0),
    "mtemp": ("mem_temp_c", 1.0),
    "sm": ("util_gpu", 1.0),
    "mem": ("util_mem", 1.0),
    "enc": ("util_enc", 1.0),
    "dec": ("util_dec", 1.0),
    "jpg": ("util_jpg", 1.0),
    "ofa": ("util_ofa", 1.0),
    "mclk": ("mem_clock_mhz", 1.0),
    "pclk": ("sm_clock_mhz", 1.0),
    "fb": ("fb_used_mib", 1.0),
    "rxpci": ("pcie_rx_nvml_bps", MIB),
    "txpci": ("pcie_tx_nvml_bps", MIB),
}
NAMES_LINE = r"(?i)^#\s*(?:Date\s+)?(?:Time\s+)?gpu(?:\s|$)"
UNITS_LINE = r"(?i)^#\s*(?:YYYYMMDD\s+)?(?:HH:MM:SS\s+)?Idx(?:\s|$)"
_SNIFF = re.compile(rb"(?im)^#\s*(?:Date\s+)?(?:Time\s+)?gpu\s+\w+.*\n#\s*\S*\s*\S*\s*Idx\b")


def sniff(head: bytes) -> bool:
    return bool(_SNIFF.search(head))


class DmonReader:
    def __init__(self, source: Source, writer: SourceWriter, options: IngestOptions) -> None:
        self.writer = writer
        self.options = options
        self.names: list[str] | None = None
        self.counter = SampleCounter(["gpu"])
        self.clock = clock_for(source, options.start, options.interval_s)
        self.unrecognised: Counter[str] = Counter()
        self.clockless = False
        self.date_assumed: str | None = None
        self.headers = 0
        self.empty_blocks = 0
        self._rows_in_block = 0

    def read_block(self, block: pl.DataFrame) -> None:
        block = block.filter(pl.col("line").str.strip_chars() != "")
        is_names = pl.col("line").str.contains(NAMES_LINE)
        block = block.with_columns(
            _seg=is_names.cum_sum(),
            _kind=pl.when(is_names)
            .then(pl.lit("names"))
            .when(pl.col("line").str.contains(UNITS_LINE))
            .then(pl.lit("units"))
            .when(pl.col("line").str.starts_with("#"))
            .then(pl.lit("comment"))
            .otherwise(pl.lit("row")),
        )
        comments = block.filter(pl.col("_kind") == "comment").height
        if comments:
            self.unrecognised["comment line"] += comments
        for _, part in block.group_by("_seg", maintain_order=True):
            head = part.filter(pl.col("_kind") == "names")
            if head.height:
                if self.names is not None and self._rows_in_block == 0:
                    self.empty_blocks += 1
                self.headers += 1
                self._rows_in_block = 0
                self.names = head["line"][0].lstrip("#").split()
            rows = part.filter(pl.col("_kind") == "row")
            if rows.height:
                self._rows_in_block += rows.height
                self._rows(rows)

    def finish(self) -> None:
        if self.names is not None and self._rows_in_block == 0:
            self.empty_blocks += 1  # the last header block had no rows

    def _rows(self, rows: pl.DataFrame) -> None:
        if self.names is None:
            self.writer.write("quarantine", quarantine_rows(rows, "dmon row before any header"))
            return
        names = self.names
        mapped = [COLUMNS[x.lower()][0] for x in names if x.lower() in COLUMNS]
        repeated = sorted({c for c in mapped if mapped.count(c) > 1})
        if repeated:  # found by tests/test_hostile_fuzz.py: a header naming `gpu` twice
            reason = f"the header names {repeated[0]!r} twice"
            self.writer.write("quarantine", quarantine_rows(rows, reason))
            return
        rows = rows.with_columns(_f=pl.col("line").str.extract_all(r"\S+"))
        n = pl.col("_f").list.len()
        wrong = rows.filter(n != len(names))
        if wrong.height:
            why = pl.format("{} fields, the header has {}", n, pl.lit(len(names)))
            self.writer.write("quarantine", quarantine_rows(wrong, why))
        rows = rows.filter(n == len(names))
        values: list[pl.Expr] = []
        bad: list[pl.Expr] = []
        lower = [x.lower() for x in names]
        for i, name in enumerate(lower):
            raw = pl.col("_f").list.get(i)
            if name in COLUMNS:
                column, factor = COLUMNS[name]
                num = raw.cast(pl.Float64, strict=False)
                if column == "gpu":
                    values.append(raw.cast(pl.Int64, strict=False).alias("gpu"))
                else:
                    values.append((num * factor).alias(column))
                is_null = raw.str.contains(NULL_TOKENS)
                bad.append(
                    pl.when(~is_null & num.is_null()).then(pl.lit(f"bad {name} value: ") + raw)
                )
            elif name not in ("date", "time"):
                self.unrecognised[f"column:{names[i]}"] += rows.height
        frame = rows.select(
            "lineno",
            "line",
            *values,
            _ts=self._time(lower),
            _bad=join_reasons(bad),
        )
        flagged = frame.filter(pl.col("_bad").is_not_null() | pl.col("gpu").is_null())
        if flagged.height:
            why = pl.coalesce(pl.col("_bad"), pl.lit("no GPU index"))
            self.writer.write("quarantine", quarantine_rows(flagged, why))
        frame = frame.filter(pl.col("gpu").is_not_null()).drop("_bad")
        frame, out_of_range = range_check(frame)
        self.writer.write("quarantine", out_of_range)
        if "time" in lower:
            no_time = frame.filter(pl.col("_ts").is_null())
            if no_time.height:
                self.writer.write("quarantine", quarantine_rows(no_time, "unreadable date/time"))
            frame = frame.filter(pl.col("_ts").is_not_null()).rename({"_ts": "ts"})
            self.writer.write("gpu_samples", frame.drop("lineno", "line"))
        else:
            self.clockless = True
            stage_clockless(self.writer, self.counter.number(frame.drop("lineno", "line", "_ts")))

    def _time(self, lower: list[str]) -> pl.Expr:
        if "time" not in lower:
            return pl.lit(None, pl.Int64)
        time = pl.col("_f").list.get(lower.index("time"))
        if "date" in lower:
            date = pl.col("_f").list.get(lower.index("date"))
        else:  # -o T: the date comes from --start or the file mtime
            anchor = self.clock.start_ns if self.clock.start_ns is not None else self.clock.end_ns
            day = pl.from_epoch(pl.lit(anchor), "ns").dt.replace_time_zone("UTC")
            day = day.dt.convert_time_zone(self.options.tz).dt.strftime("%Y%m%d")
            self.date_assumed = "date of --start" if self.clock.start_ns else "date of file mtime"
            date = day
        stamp = (date + pl.lit(" ") + time).str.to_datetime(
            "%Y%m%d %H:%M:%S", strict=False, time_unit="ns"
        )
        return local_to_ns(stamp, self.options.tz)


def ingest(
    source: Source, writer: SourceWriter, options: IngestOptions, progress: Callable[[int], None]
) -> dict[str, Any]:
    reader = DmonReader(source, writer, options)
    with source.open() as stream:
        for block in iter_blocks(stream, progress):
            reader.read_block(block)
    reader.finish()
    assumptions: dict[str, Any] = {"tz": options.tz}
    if reader.clockless:
        finish_clockless(writer, reader.clock)
        assumptions |= reader.clock.assumptions
    if reader.date_assumed:
        assumptions["date"] = reader.date_assumed
    return {
        "clock_domain": "assumed_interval" if reader.clockless else "host_local_time",
        "assumptions": assumptions,
        "unrecognised": dict(reader.unrecognised),
        "header_blocks": reader.headers,
        "empty_blocks": reader.empty_blocks,
    }
