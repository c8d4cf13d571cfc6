"""nvidia-smi `--query-gpu=… --format=csv[,noheader][,nounits]` → gpu_samples.

Headers are matched by pattern (nvidia-smi's own `utilization.gpu [%]` as well as homemade
`gpu_utilization[%]`); a header re-printed half-way (a column added) starts a new segment.
Values may carry units (`99 %`, `30994 MiB`) or not; `[N/A]`, `[Not Supported]`, `N/A` are
null. Timestamps are host-local (`--tz`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
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
    parse_iso_ns,
    quarantine_rows,
    range_check,
    stage_clockless,
)
from traceq.ingest.options import IngestOptions
from traceq.ingest.source import Source
from traceq.writer import SourceWriter

# Normalised field name (lower case, unit removed, spaces/underscores → dots) → column.
FIELD_PATTERNS: tuple[tuple[str, str], ...] = (
    ("timestamp", r"timestamp|time|date\.?time|ts"),
    ("gpu", r"index|gpu|gpu\.index|gpu\.id|idx"),
    ("uuid", r"(gpu\.)?uuid"),
    ("pci_bus_id", r"pci\.bus\.id|pci\.bus|bus\.id"),
    ("model_name", r"name|gpu\.name|product\.name|model(\.name)?"),
    ("driver_version", r"driver\.version"),
    ("util_gpu", r"utilization\.gpu|gpu\.util(ization)?|util(ization)?(\.gpu)?"),
    ("util_mem", r"utilization\.memory|mem(ory)?\.util(ization)?|util(ization)?\.mem(ory)?"),
    ("util_enc", r"utilization\.encoder|enc(oder)?\.util(ization)?"),
    ("util_dec", r"utilization\.decoder|dec(oder)?\.util(ization)?"),
    ("fb_total_mib", r"memory\.total|mem\.total|fb\.total"),
    ("fb_used_mib", r"memory\.used|mem\.used|fb\.used"),
    ("fb_free_mib", r"memory\.free|mem\.free|fb\.free"),
    ("fb_reserved_mib", r"memory\.reserved|mem\.reserved|fb\.reserved"),
    ("power_w", r"power\.draw(\.instant|\.average)?|power(\.usage)?"),
    ("temp_c", r"temperature\.gpu|temperature|temp|gpu\.temp(erature)?"),
    ("mem_temp_c", r"temperature\.memory|mem(ory)?\.temp(erature)?"),
    ("sm_clock_mhz", r"clocks\.(current\.)?sm|clocks?\.sm|sm\.clocks?"),
    ("mem_clock_mhz", r"clocks\.(current\.)?mem(ory)?|clocks?\.mem(ory)?|mem(ory)?\.clocks?"),
    ("pstate", r"pstate|performance\.state"),
)
_COMPILED = [(col, re.compile(f"^(?:{pat})$")) for col, pat in FIELD_PATTERNS]
_HEADER_WORDS = r"(?i)utilization|memory|temperature|timestamp|index|uuid|power|clocks|pstate|name"
_SNIFF_FIELDS = re.compile(
    r"(?i)utilization\.|memory\.(used|total|free)|temperature|power\.draw|clocks\.|pstate|"
    r"pci\.bus_id|gpu_util|fan\.speed"
)
_TS_ROW = re.compile(rb"^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}\.\d{3}\s*,", re.M)

# Unit (lower case) → factor to the column's unit, per kind of column.
MIB = {"": 1.0, "mib": 1.0, "mb": 1.0, "gib": 1024.0, "gb": 1024.0, "kib": 1 / 1024, "kb": 1 / 1024}
UNITS: dict[str, dict[str, float]] = {
    "fb_total_mib": MIB,
    "fb_used_mib": MIB,
    "fb_free_mib": MIB,
    "fb_reserved_mib": MIB,
    "power_w": {"": 1.0, "w": 1.0, "mw": 1e-3, "kw": 1e3},
    "sm_clock_mhz": {"": 1.0, "mhz": 1.0, "ghz": 1e3, "khz": 1e-3},
    "mem_clock_mhz": {"": 1.0, "mhz": 1.0, "ghz": 1e3, "khz": 1e-3},
    **{c: {"": 1.0, "%": 1.0} for c in ("util_gpu", "util_mem", "util_enc", "util_dec")},
    "temp_c": {"": 1.0, "c": 1.0, "°c": 1.0},
    "mem_temp_c": {"": 1.0, "c": 1.0, "°c": 1.0},
}
TEXT_COLUMNS = ("uuid", "pci_bus_id", "model_name", "driver_version")
VALUE = r"^([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*([A-Za-z%°/]*)$"
SMI_TIME = "%Y/%m/%d %H:%M:%S%.f"


@dataclass(frozen=True)
class Field:
    name: str  # as printed
    column: str | None  # gpu_samples column, None when unknown or a repeat
    unit: str  # unit from the header, lower case ("" when none)
    printed_unit: str = ""  # the header's unit as printed, e.g. `MiB`


def parse_header(line: str) -> list[Field]:
    """Fields of a header line, each matched by pattern to a gpu_samples column."""
    out: list[Field] = []
    taken: set[str] = set()
    for raw in line.split(","):
        m = re.match(r"^\s*(.*?)\s*(?:\[([^\]]*)\]|\(([^)]*)\))?\s*$", raw)
        name = (m.group(1) if m else raw).strip()
        unit = ((m.group(2) or m.group(3) or "") if m else "").strip().lower()
        norm = re.sub(r"[\s_]+", ".", name.lower())
        column = next((col for col, rx in _COMPILED if rx.match(norm)), None)
        if column in taken:  # power.draw.instant next to power.draw: keep the first
            column = None
        if column:
            taken.add(column)
        printed = ((m.group(2) or m.group(3) or "") if m else "").strip()
        out.append(Field(name, column, unit, printed))
    return out


def sniff(head: bytes) -> bool:
    text = head.decode("utf-8", "replace")
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    if "," in first and len(set(m.group(0).lower() for m in _SNIFF_FIELDS.finditer(first))) >= 2:
        return True
    return bool(_TS_ROW.search(head[:4096])) and not first.lstrip().startswith(("{", "["))


# Literal "no value" cells, checked with a hash lookup on the fast path.
NULL_LITERALS = ["[N/A]", "[Not Supported]", "N/A", "[Unknown Error]", "-", "NaN", ""]


def _fast_columns(fields: list[Field], tz: str) -> tuple[list[pl.Expr], pl.Expr]:
    """(value expressions, needs-slow-path flag) over stripped cells `field_<i>`.

    The fast path reads the common case — the header's own unit or none, nvidia-smi's
    timestamp layout — with casts only. A cell it cannot read (another unit, an ISO time, a
    typo) flags its row for `_value_columns`, which reads or rejects it with a reason.
    """
    values: list[pl.Expr] = []
    slow: list[pl.Expr] = []
    for i, f in enumerate(fields):
        if f.column is None:
            continue
        cell = pl.col(f"field_{i}")
        is_null = cell.is_null() | cell.is_in(NULL_LITERALS)
        if f.column == "timestamp":
            naive = cell.str.to_datetime(SMI_TIME, strict=False, time_unit="ns")
            value = local_to_ns(naive, tz)
            slow.append(value.is_null())
            values.append(value.alias("ts"))
            continue
        if f.column in TEXT_COLUMNS:
            values.append(pl.when(is_null).then(None).otherwise(cell).alias(f.column))
            continue
        if f.column == "gpu":
            value = cell.cast(pl.Int64, strict=False)
        elif f.column == "pstate":
            value = cell.str.strip_prefix("P").cast(pl.Int64, strict=False)
        else:
            factor = UNITS[f.column].get(f.unit)
            number = (
                cell.str.strip_suffix(f.printed_unit).str.strip_chars_end()
                if f.printed_unit
                else cell
            )
            value = number.cast(pl.Float64, strict=False) * (
                factor if factor is not None else float("nan")
            )
            if factor is None:
                value = pl.lit(None, pl.Float64)
        slow.append(value.is_null() & ~is_null)
        values.append(value.alias(f.column))
    return values, pl.any_horizontal(slow) if slow else pl.lit(False)


def _value_columns(fields: list[Field], tz: str) -> tuple[list[pl.Expr], list[pl.Expr]]:
    """(value expressions, bad-value expressions) for the fields of one header."""
    values: list[pl.Expr] = []
    bad: list[pl.Expr] = []
    for i, f in enumerate(fields):
        if f.column is None:
            continue
        raw = pl.col("_f").list.get(i, null_on_oob=True).str.strip_chars()
        is_null = raw.is_null() | raw.str.contains(NULL_TOKENS)
        if f.column == "timestamp":
            naive = raw.str.to_datetime(SMI_TIME, strict=False, time_unit="ns")
            value = pl.coalesce(local_to_ns(naive, tz), parse_iso_ns(raw, tz)).alias("ts")
        elif f.column in TEXT_COLUMNS:
            value = pl.when(is_null).then(None).otherwise(raw).alias(f.column)
        elif f.column == "gpu":
            value = raw.cast(pl.Int64, strict=False).alias("gpu")
        elif f.column == "pstate":
            value = raw.str.extract(r"^P(\d+)$", 1).cast(pl.Int64).alias("pstate")
        else:
            parts = raw.str.extract_groups(VALUE)
            unit = pl.coalesce(
                pl.when(parts.struct[1] != "").then(parts.struct[1].str.to_lowercase()),
                pl.lit(f.unit),
            )
            factor = unit.replace_strict(UNITS[f.column], default=None, return_dtype=pl.Float64)
            value = (parts.struct[0].cast(pl.Float64) * factor).alias(f.column)
        values.append(value)
        if f.column != "timestamp":
            bad.append(
                pl.when(~is_null & value.is_null()).then(pl.lit(f"bad {f.name} value: ") + raw)
            )
    return values, bad


class CsvReader:
    def __init__(self, source: Source, writer: SourceWriter, options: IngestOptions) -> None:
        self.writer = writer
        self.options = options
        self.fields: list[Field] | None = (
            parse_header(",".join(options.columns)) if options.columns else None
        )
        self.counter = SampleCounter(["gpu", "uuid", "pci_bus_id"])
        self.unrecognised: Counter[str] = Counter()
        self.clockless = False
        self.clock = clock_for(source, options.start, options.interval_s)
        self.headers = 0

    def read_block(self, block: pl.DataFrame) -> None:
        block = block.filter(pl.col("line").str.strip_chars() != "")
        is_header = ~pl.col("line").str.contains(r"(?:^|,)\s*[\d\[]") & pl.col("line").str.contains(
            _HEADER_WORDS
        )
        block = block.with_columns(_seg=is_header.cum_sum(), _hdr=is_header)
        for (seg,), part in block.group_by("_seg", maintain_order=True):
            head = part.filter(pl.col("_hdr"))
            if head.height:
                self.headers += 1
                if not self.options.columns:
                    self.fields = parse_header(head["line"][0])
            rows = part.filter(~pl.col("_hdr"))
            if rows.height:
                self._rows(rows)
            del seg

    def _rows(self, rows: pl.DataFrame) -> None:
        if self.fields is None:
            self.writer.write(
                "quarantine",
                quarantine_rows(
                    rows,
                    "headerless nvidia-smi CSV: pass --columns with the --query-gpu field list",
                ),
            )
            return
        fields = self.fields
        n_fields = pl.col("line").str.count_matches(",", literal=True) + 1
        wrong = rows.filter(n_fields != len(fields))
        if wrong.height:
            reason = pl.format("{} fields, the header has {}", n_fields, pl.lit(len(fields)))
            self.writer.write("quarantine", quarantine_rows(wrong, reason))
        rows = rows.filter(n_fields == len(fields))
        for f in fields:
            if f.column is None:
                self.unrecognised[f"column:{f.name}"] += rows.height
        cells = rows.select(
            "lineno", "line", pl.col("line").str.split_exact(",", len(fields) - 1).alias("_s")
        ).unnest("_s")
        cells = cells.with_columns(
            pl.col(f"field_{i}").str.strip_chars() for i, f in enumerate(fields) if f.column
        )
        fast, needs_slow = _fast_columns(fields, self.options.tz)
        frame = cells.select("lineno", "line", *fast, _slow=needs_slow)
        slow_lines = frame.filter(pl.col("_slow")).select("lineno")
        frame = frame.filter(~pl.col("_slow")).drop("_slow")
        if slow_lines.height:
            slow = rows.join(slow_lines, on="lineno", how="semi")
            values, bad = _value_columns(fields, self.options.tz)
            slow = slow.with_columns(_f=pl.col("line").str.split(","))
            slow = slow.select("lineno", "line", *values, _bad=join_reasons(bad))
            flagged = slow.filter(pl.col("_bad").is_not_null())
            if flagged.height:
                self.writer.write("quarantine", quarantine_rows(flagged, pl.col("_bad")))
            frame = pl.concat([frame, slow.drop("_bad")], how="vertical_relaxed").sort("lineno")
        frame, out_of_range = range_check(frame)
        self.writer.write("quarantine", out_of_range)
        for col in ("gpu", "uuid", "pci_bus_id"):
            if col not in frame.columns:
                frame = frame.with_columns(
                    pl.lit(None, pl.String if col != "gpu" else pl.Int64).alias(col)
                )
        if "ts" in frame.columns:
            no_time = frame.filter(pl.col("ts").is_null())
            if no_time.height:
                self.writer.write("quarantine", quarantine_rows(no_time, "unreadable timestamp"))
            self.writer.write(
                "gpu_samples", frame.filter(pl.col("ts").is_not_null()).drop("lineno", "line")
            )
        else:
            self.clockless = True
            stage_clockless(self.writer, self.counter.number(frame.drop("lineno", "line")))


def ingest(
    source: Source, writer: SourceWriter, options: IngestOptions, progress: Callable[[int], None]
) -> dict[str, Any]:
    reader = CsvReader(source, writer, options)
    with source.open() as stream:
        for block in iter_blocks(stream, progress):
            reader.read_block(block)
    assumptions: dict[str, Any] = {"tz": options.tz}
    if options.columns:
        assumptions["columns"] = "--columns: " + ",".join(options.columns)
    if reader.clockless:
        finish_clockless(writer, reader.clock)
        assumptions |= reader.clock.assumptions
    return {
        "clock_domain": "assumed_interval" if reader.clockless else "host_local_time",
        "assumptions": assumptions,
        "unrecognised": dict(reader.unrecognised),
        "header_blocks": reader.headers,
    }
