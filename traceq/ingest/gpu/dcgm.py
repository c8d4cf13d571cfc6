"""DCGM text: dcgm-exporter Prometheus scrapes and `dcgmi dmon` output → staged values
(`long.py`) → gpu_samples.

Scrapes: one scrape, or scrapes concatenated with a timestamp line before each (`# ts=<ISO>`,
`# <ISO>`, a bare ISO / epoch line); optional per-sample exposition timestamps (ms) win.
Without timestamp lines the k-th occurrence of a series is scrape k (`--start` /
`--interval`, else the file mtime as the last scrape). HELP / TYPE lines are optional, label
sets ragged; MIG, vGPU and Kubernetes pod labels are kept.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import polars as pl

from traceq.ingest.gpu import long
from traceq.ingest.gpu.common import (
    NULL_TOKENS,
    SampleCounter,
    clock_for,
    iter_blocks,
    parse_iso_ns,
    quarantine_rows,
)
from traceq.ingest.options import IngestOptions
from traceq.ingest.source import Source
from traceq.writer import SourceWriter

SAMPLE = (
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+"
    r"(?P<value>[-+]?(?:\d*\.?\d+(?:[eE][-+]?\d+)?|NaN|Inf)|\d+\.)(?:\s+(?P<ts>-?\d+))?\s*$"
)
SEPARATOR = (
    r"(?i)^\s*(?:#\s*)?(?:(?:ts|time|timestamp|scrape(?:_time|_ts)?|date)\s*[=:]\s*)?"
    r"(?P<t>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\s*(?:Z|UTC|[+-]\d{2}:?\d{2})?"
    r"|\d{10}(?:\.\d+)?|\d{13}|\d{16}|\d{19})\s*$"
)
META = r"^#\s*(?:HELP|TYPE|UNIT|EOF)\b"
# exporter label → staged column
LABELS = {
    "gpu": "gpu",
    "UUID": "uuid",
    "pci_bus_id": "pci_bus_id",
    "modelName": "model_name",
    "Hostname": "host",
    "DCGM_FI_DRIVER_VERSION": "driver_version",
    "GPU_I_PROFILE": "mig_profile",
    "GPU_I_ID": "mig_instance",
    "pod": "pod",
    "namespace": "namespace",
    "container": "container",
}
# Labels read but not stored: they repeat another column or describe the scrape / the value.
IGNORED_LABELS = ("device", "pod_uid", "err_code", "err_msg", "job", "instance", "__name__")
_KNOWN_LABEL = "|".join(re.escape(k) for k in (*LABELS, *IGNORED_LABELS))
_SNIFF_PROM = re.compile(rb"(?m)^DCGM_FI_[A-Z0-9_]+(?:\{[^\n]*\})?\s+[-+0-9.eENaIf]+")
_SNIFF_DCGMI = re.compile(rb"(?m)^#Entity\s+\S+")
ENTITY_ROW = r"^(?P<kind>GPU-CI|GPU-I|GPU|Switch|Link|CPU|Core)\s+(?P<id>\d+)\s+(?P<rest>.*)$"


def sniff_prom(head: bytes) -> bool:
    return bool(_SNIFF_PROM.search(head))


def sniff_dcgmi(head: bytes) -> bool:
    return bool(_SNIFF_DCGMI.search(head))


def label(name: str) -> pl.Expr:
    """The value of label `name` in the `labels` text (escapes kept)."""
    return pl.col("labels").str.extract(rf'(?:^|,)\s*{re.escape(name)}="((?:[^"\\]|\\.)*)"', 1)


def label_columns() -> list[pl.Expr]:
    """Staged identity columns from the exposition labels."""
    exprs = [label(k).alias(v) for k, v in LABELS.items() if k not in ("gpu", "GPU_I_ID")]
    exprs += [
        label("gpu").cast(pl.Int64, strict=False).alias("gpu"),
        label("GPU_I_ID").cast(pl.Int64, strict=False).alias("mig_instance"),
        pl.when(label("GPU_I_ID").is_not_null())
        .then(pl.lit("GPU-I"))
        .otherwise(pl.lit("GPU"))
        .alias("entity"),
    ]
    return exprs


def count_unknown_labels(frame: pl.DataFrame, unrecognised: Counter[str]) -> None:
    """Count label names that have no column and are not knowingly ignored (`len`: lines
    per label set)."""
    rest = frame.select(
        pl.col("labels").str.replace_all(rf'(?:^|,)\s*(?:{_KNOWN_LABEL})="(?:[^"\\]|\\.)*"', "")
    )
    rest = rest.with_columns(frame["len"] if "len" in frame.columns else pl.lit(1).alias("len"))
    keys = rest.filter(pl.col("labels").str.contains(r'\w+="')).select(
        pl.col("labels").str.extract_all(r'(\w+)="'), "len"
    )
    keys = keys.explode("labels").with_columns(pl.col("labels").str.strip_suffix('="'))
    for key, n in keys.group_by("labels").agg(pl.col("len").sum()).iter_rows():
        unrecognised[f"label:{key}"] += n


class PromReader:
    def __init__(self, source: Source, writer: SourceWriter, options: IngestOptions) -> None:
        self.writer = writer
        self.options = options
        self.clock = clock_for(source, options.start, options.interval_s)
        self.series = SampleCounter(["name", "labels"])
        self.unrecognised: Counter[str] = Counter()
        self.scrape_ts: int | None = None
        self.separators = 0
        self.samples = 0
        self.nan = 0

    def read_block(self, block: pl.DataFrame) -> None:
        line = pl.col("line")
        is_sep = line.str.contains(SEPARATOR)
        block = block.filter(line.str.strip_chars() != "").with_columns(_is_sep=is_sep)
        is_sep = pl.col("_is_sep")
        # parse the few separator lines only, then join their time back
        seps = block.filter(is_sep).select(
            "lineno", _sep=parse_iso_ns(line.str.extract(SEPARATOR, 1), self.options.tz)
        )
        block = block.join(seps, on="lineno", how="left", maintain_order="left")
        bad_sep = block.filter(is_sep & pl.col("_sep").is_null())
        if bad_sep.height:
            self.writer.write("quarantine", quarantine_rows(bad_sep, "unreadable scrape time"))
        self.separators += block.filter(is_sep).height
        block = block.with_columns(_scrape=pl.col("_sep").forward_fill())
        if self.scrape_ts is not None:
            block = block.with_columns(pl.col("_scrape").fill_null(self.scrape_ts))
        last = block["_scrape"].drop_nulls()
        if last.len():
            self.scrape_ts = int(last[-1])
        rest = block.filter(~is_sep)
        # HELP / TYPE lines describe series; they are not records
        comments = rest.filter(line.str.starts_with("#") & ~line.str.contains(META)).height
        if comments:
            self.unrecognised["comment line"] += comments
        rest = rest.filter(~line.str.starts_with("#"))
        parsed = rest.with_columns(line.str.extract_groups(SAMPLE).alias("_m")).unnest("_m")
        broken = parsed.filter(pl.col("name").is_null())
        if broken.height:
            reason = "not an exposition sample line (cut or malformed)"
            self.writer.write("quarantine", quarantine_rows(broken, reason))
        samples = parsed.filter(pl.col("name").is_not_null()).with_columns(
            pl.col("labels").fill_null("")
        )
        if samples.height:
            self._samples(samples)

    def _samples(self, samples: pl.DataFrame) -> None:
        self.samples += samples.height
        col = pl.col("name").replace_strict(long.EXPORTER_FIELDS, default=None)
        samples = samples.with_columns(col=col)
        unknown = samples.filter(pl.col("col").is_null())
        for name, n in unknown.group_by("name").len().iter_rows():
            self.unrecognised[f"metric:{name}"] += n
        samples = samples.filter(pl.col("col").is_not_null())
        if not samples.height:
            return
        # label sets repeat on every line of a GPU: read each distinct set once
        label_sets = samples.group_by("labels").len()
        count_unknown_labels(label_sets, self.unrecognised)
        idents = label_sets.select("labels", *label_columns())
        exposition_ts = pl.col("ts").cast(pl.Int64, strict=False) * 1_000_000
        if self.separators == 0:
            samples = self.series.number(samples)
        else:
            samples = samples.with_columns(_k=pl.lit(0, pl.Int64))
        value = pl.col("value").str.replace(r"^([-+]?)Inf$", "${1}inf").cast(pl.Float64)
        frame = samples.select(
            "lineno",
            "line",
            "col",
            "_k",
            "labels",
            ts=pl.coalesce(exposition_ts, pl.col("_scrape")),
            value=value,
        )
        frame = frame.join(idents, on="labels", how="left", maintain_order="left").drop("labels")
        self.nan += long.check_and_stage(self.writer, frame)


def ingest_prom(
    source: Source, writer: SourceWriter, options: IngestOptions, progress: Callable[[int], None]
) -> dict[str, Any]:
    reader = PromReader(source, writer, options)
    with source.open() as stream:
        for block in iter_blocks(stream, progress):
            reader.read_block(block)
    counts = long.finalize(writer, reader.clock)
    assumptions: dict[str, Any] = {}
    if counts["clockless_values"]:
        assumptions |= reader.clock.assumptions
        assumptions["scrapes"] = "k-th occurrence of a series = scrape k"
    if reader.separators:
        assumptions["tz"] = options.tz + " (scrape timestamp lines without an offset)"
    return {
        "clock_domain": "unix_ns" if not counts["clockless_values"] else "assumed_interval",
        "assumptions": assumptions,
        "unrecognised": dict(reader.unrecognised),
        "scrapes": reader.separators or None,
        "samples": reader.samples,
        "nan_values": reader.nan,
        **counts,
    }


# -- dcgmi dmon ---------------------------------------------------------------------------


class DcgmiReader:
    def __init__(self, source: Source, writer: SourceWriter, options: IngestOptions) -> None:
        self.source = source
        self.writer = writer
        self.options = options
        self.clock = clock_for(source, options.start, options.interval_s)
        self.counter = SampleCounter(["entity", "_id"])
        self.names: list[str] | None = None
        self.unrecognised: Counter[str] = Counter()
        self.interval_from_command: float | None = None
        self.nan = 0
        self.headers = 0  # `#Entity` lines: a file of headers only still shows what it held

    def read_block(self, block: pl.DataFrame) -> None:
        line = pl.col("line")
        block = block.filter(line.str.strip_chars() != "")
        kind = (
            pl.when(line.str.contains(r"^#Entity\b"))
            .then(pl.lit("header"))
            .when(line.str.contains(r"^ID\s*$"))
            .then(pl.lit("id"))
            .when(line.str.contains(ENTITY_ROW))
            .then(pl.lit("row"))
            .when(line.str.contains(r"^\s*(?:\$\s*)?dcgmi\s"))
            .then(pl.lit("command"))
            .otherwise(pl.lit("other"))
        )
        block = block.with_columns(_kind=kind, _seg=(kind == "header").cum_sum())
        self.headers += block.filter(pl.col("_kind") == "header").height
        for text in block.filter(pl.col("_kind") == "command")["line"]:
            self.unrecognised["command line"] += 1
            m = re.search(r"\s-d\s+(\d+)", text)
            if m and self.options.interval_s is None:
                self.interval_from_command = int(m.group(1)) / 1000
                self.clock = clock_for(self.source, self.options.start, self.interval_from_command)
        other = block.filter(pl.col("_kind") == "other")
        if other.height:
            self.writer.write("quarantine", quarantine_rows(other, "not a dcgmi dmon line"))
        for _, part in block.group_by("_seg", maintain_order=True):
            head = part.filter(pl.col("_kind") == "header")
            if head.height:
                self.names = head["line"][0].lstrip("#").split()[1:]
            rows = part.filter(pl.col("_kind") == "row")
            if rows.height:
                self._rows(rows)

    def _rows(self, rows: pl.DataFrame) -> None:
        if self.names is None:
            self.writer.write("quarantine", quarantine_rows(rows, "dcgmi row before #Entity"))
            return
        names = self.names
        rows = rows.with_columns(pl.col("line").str.extract_groups(ENTITY_ROW).alias("_m"))
        rows = rows.unnest("_m").with_columns(
            entity=pl.col("kind"),
            _id=pl.col("id").cast(pl.Int64),
            # `38735656050(36.07GB/s)`: a hand-annotated value; the annotation is dropped
            _f=pl.col("rest").str.replace_all(r"\([^)]*\)", "").str.extract_all(r"\S+"),
        )
        n = pl.col("_f").list.len()
        wrong = rows.filter(n != len(names))
        if wrong.height:
            reason = pl.format("{} values, the header has {}", n, pl.lit(len(names)))
            self.writer.write("quarantine", quarantine_rows(wrong, reason))
        rows = self.counter.number(rows.filter(n == len(names)))
        is_gpu = pl.col("entity").is_in(["GPU", "Switch"])
        frames = []
        for i, name in enumerate(names):
            column = long.DMON_FIELDS.get(name.upper())
            if column is None:
                self.unrecognised[f"column:{name}"] += rows.height
                continue
            raw = pl.col("_f").list.get(i)
            num = raw.cast(pl.Float64, strict=False)
            bad = rows.filter(~raw.str.contains(NULL_TOKENS) & num.is_null())
            if bad.height:
                reason = pl.lit(f"bad {name} value: ") + raw
                self.writer.write("quarantine", quarantine_rows(bad, reason))
            frames.append(
                rows.select(
                    "lineno",
                    "line",
                    "_k",
                    "entity",
                    gpu=pl.when(is_gpu).then(pl.col("_id")),
                    mig_instance=pl.when(~is_gpu).then(pl.col("_id")),
                    col=pl.lit(column),
                    value=num,
                    ts=pl.lit(None, pl.Int64),
                )
            )
        if frames:
            frame = pl.concat(frames)
            missing = [c for c in long.LONG_SCHEMA.names() if c not in frame.columns]
            frame = frame.with_columns(pl.lit(None).alias(c) for c in missing)
            self.nan += long.check_and_stage(self.writer, frame)


def ingest_dcgmi(
    source: Source, writer: SourceWriter, options: IngestOptions, progress: Callable[[int], None]
) -> dict[str, Any]:
    reader = DcgmiReader(source, writer, options)
    with source.open() as stream:
        for block in iter_blocks(stream, progress):
            reader.read_block(block)
    counts = long.finalize(writer, reader.clock)
    assumptions = dict(reader.clock.assumptions)
    if reader.interval_from_command is not None:
        assumptions["interval_from"] = "-d of the dcgmi command line in the file"
    return {
        "clock_domain": "assumed_interval",
        "assumptions": assumptions,
        "unrecognised": dict(reader.unrecognised),
        "header_blocks": reader.headers,
        **counts,
    }
