"""Prometheus HTTP API JSON (`/api/v1/query_range` matrix, `/api/v1/query` vector) of DCGM
and vLLM metrics → gpu_samples (via `long.py`) and engine_stats.

Accepted shapes: the API response (`{"status", "data": {"resultType", "result"}}`), its bare
`data` object, a JSON array of either, or one response per line. The same GPU series scraped
by two jobs (labels differ only in job / instance) is kept once (the pivot dedupes). vLLM
gauges (running, waiting, swapped, KV-cache usage, prefix-cache hit rate) and token counters
(as rates) become engine_stats rows; other counters and histograms are counted as unrecognised.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import Any

import orjson
import polars as pl

from traceq.ingest.blocks import read_whole
from traceq.ingest.gpu import long
from traceq.ingest.gpu.common import clock_for
from traceq.ingest.gpu.dcgm import LABELS
from traceq.ingest.options import IngestOptions
from traceq.ingest.source import Source
from traceq.schema import RAW_LIMIT
from traceq.writer import SourceWriter

VLLM_GAUGES = {
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:num_requests_swapped": "swapped",
    "vllm:gpu_cache_usage_perc": "kv_usage",
    "vllm:kv_cache_usage_perc": "kv_usage",
    "vllm:cpu_cache_usage_perc": "cpu_kv_usage",
    "vllm:gpu_prefix_cache_hit_rate": "prefix_hit_rate",
}
# vLLM token counters: their increase per second between samples is the throughput.
VLLM_COUNTERS = {
    "vllm:prompt_tokens_total": "prompt_tps",
    "vllm:generation_tokens_total": "gen_tps",
}
ENGINE_INT = ("running", "waiting", "swapped")


def sniff(head: bytes) -> bool:
    text = head.lstrip()
    return text[:1] in (b"{", b"[") and b'"resultType"' in head and b'"result"' in head


def _documents(data: bytes) -> list[Any]:
    """The response objects in the file: one document, an array, or one per line."""
    try:
        doc = orjson.loads(data)
        return doc if isinstance(doc, list) else [doc]
    except orjson.JSONDecodeError:
        out: list[Any] = []
        for n, line in enumerate(data.splitlines(), 1):
            if line.strip():
                try:
                    out.append(orjson.loads(line))
                except orjson.JSONDecodeError as exc:
                    out.append(
                        {
                            "_broken": n,
                            "_error": str(exc),
                            "_raw": line[:RAW_LIMIT].decode("utf-8", "replace"),
                        }
                    )
        return out


def _ns(ts: Any) -> int | None:
    """Prometheus float seconds (ms precision) → ns."""
    try:
        return round(float(ts) * 1000) * 1_000_000
    except (TypeError, ValueError):
        return None


def _float(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f


def _host(metric: dict[str, str]) -> str | None:
    host = metric.get("Hostname")
    if host:
        return host
    inst = metric.get("instance")
    return inst.rsplit(":", 1)[0] if inst else None


class JsonReader:
    def __init__(self, writer: SourceWriter) -> None:
        self.writer = writer
        self.unrecognised: Counter[str] = Counter()
        self.quarantine: list[dict[str, str]] = []
        self.gpu_frames: list[pl.DataFrame] = []
        self.engine: list[dict[str, Any]] = []
        self.nan = 0
        self.series = 0

    def bad(self, location: str, reason: str, raw: Any) -> None:
        text = raw if isinstance(raw, str) else orjson.dumps(raw).decode("utf-8", "replace")
        self.quarantine.append({"location": location, "reason": reason, "raw": text[:RAW_LIMIT]})

    def document(self, n: int, doc: Any) -> None:
        where = f"document {n}"
        if not isinstance(doc, dict):
            self.bad(where, "not a JSON object", doc)
            return
        if "_broken" in doc:
            self.bad(f"line {doc['_broken']}", f"invalid JSON: {doc['_error']}", doc["_raw"])
            return
        if doc.get("status") == "error":
            self.bad(where, f"Prometheus error: {doc.get('error', '')}", doc)
            return
        data = doc.get("data", doc)
        kind = data.get("resultType") if isinstance(data, dict) else None
        result = data.get("result") if isinstance(data, dict) else None
        if kind not in ("matrix", "vector") or not isinstance(result, list):
            self.bad(where, f"no matrix / vector result (resultType {kind!r})", doc)
            return
        for i, series in enumerate(result):
            self.one_series(f"{where} series {i}", series, kind)

    def one_series(self, where: str, series: Any, kind: str) -> None:
        metric = series.get("metric") if isinstance(series, dict) else None
        points = (
            series.get("values")
            if kind == "matrix"
            else [series.get("value")]
            if isinstance(series, dict)
            else None
        )
        if not isinstance(metric, dict) or not isinstance(points, list):
            self.bad(where, "series without metric / values", series)
            return
        self.series += 1
        metric = {str(k): str(v) for k, v in metric.items()}  # labels are strings
        name = metric.get("__name__", "")
        ok = [p for p in points if isinstance(p, list) and len(p) == 2 and _ns(p[0]) is not None]
        for j, p in enumerate(points):
            if not (isinstance(p, list) and len(p) == 2 and _ns(p[0]) is not None):
                self.bad(f"{where} point {j}", "not a [time, value] pair", p)
        column = long.EXPORTER_FIELDS.get(name)
        if column is not None:
            self.gpu_series(where, metric, column, ok)
        elif name in VLLM_GAUGES:
            self.engine_series(metric, VLLM_GAUGES[name], ok)
        elif name in VLLM_COUNTERS:
            self.engine_series(metric, "_total_" + VLLM_COUNTERS[name], ok)
        else:
            self.unrecognised[f"metric:{name or '(no __name__)'}"] += len(ok)

    def gpu_series(self, where: str, metric: dict[str, str], column: str, points: list) -> None:
        ident: dict[str, Any] = {v: metric.get(k) for k, v in LABELS.items()}
        ident["host"] = _host(metric)
        for key in ("gpu", "mig_instance"):
            try:
                ident[key] = int(ident[key]) if ident[key] is not None else None
            except ValueError:
                ident[key] = None
        ident["entity"] = "GPU-I" if ident["mig_instance"] is not None else "GPU"
        values = [_float(p[1]) for p in points]
        frame = pl.DataFrame(
            {
                "ts": [_ns(p[0]) for p in points],
                "value": values,
                "line": [f"{metric.get('__name__')} {p[1]} @{p[0]}" for p in points],
                "location": [f"{where} t={p[0]}" for p in points],
            },
            schema={"ts": pl.Int64, "value": pl.Float64, "line": pl.String, "location": pl.String},
        )
        frame = frame.with_columns(
            lineno=pl.lit(None, pl.Int64),
            col=pl.lit(column),
            _k=pl.lit(0, pl.Int64),
            **{k: pl.lit(v) for k, v in ident.items()},
        )
        self.gpu_frames.append(frame)

    def engine_series(self, metric: dict[str, str], column: str, points: list) -> None:
        instance = _host(metric)
        engine = int(metric["engine"]) if str(metric.get("engine", "")).isdigit() else 0
        for p in points:
            value = _float(p[1])
            if value is not None and math.isnan(value):
                self.nan += 1
                value = None
            self.engine.append(
                {"ts": _ns(p[0]), "instance": instance, "engine": engine, column: value}
            )

    def flush(self) -> None:
        if self.gpu_frames:
            frame = pl.concat(self.gpu_frames, how="diagonal_relaxed")
            missing = [c for c in long.LONG_SCHEMA.names() if c not in frame.columns]
            frame = frame.with_columns(pl.lit(None).alias(c) for c in missing)
            self.nan += long.check_and_stage(self.writer, frame)
            self.gpu_frames.clear()
        if self.engine:
            rows = pl.DataFrame(self.engine, infer_schema_length=None)
            value_cols = [c for c in rows.columns if c not in ("ts", "instance", "engine")]
            # one row per instance / engine / time; two jobs scraping one server collapse
            stats = rows.group_by("ts", "instance", "engine", maintain_order=True).agg(
                pl.col(value_cols).drop_nulls().first()
            )
            stats = stats.with_columns(
                pl.col(c).cast(pl.Int64) for c in ENGINE_INT if c in value_cols
            )
            stats = _counter_rates(stats)
            self.writer.write("engine_stats", stats)
            self.engine.clear()
        if self.quarantine:
            self.writer.write("quarantine", pl.DataFrame(self.quarantine))
            self.quarantine.clear()


def _counter_rates(stats: pl.DataFrame) -> pl.DataFrame:
    """`_total_<col>` token counters → `<col>` rates: increase / seconds since the previous
    sample of the same instance and engine; null on the first sample and after a reset."""
    totals = [c for c in stats.columns if c.startswith("_total_")]
    if not totals:
        return stats
    stats = stats.sort("instance", "engine", "ts", nulls_last=True)
    key = ["instance", "engine"]
    dt_ns = pl.col("ts").diff().over(key)
    rates = []
    for c in totals:
        rise = pl.col(c).diff().over(key)
        rate = rise * 1e9 / dt_ns  # not rise / (dt_ns / 1e9): that rounds 100 to 99.99…
        rates.append(pl.when((rise >= 0) & (dt_ns > 0)).then(rate).alias(c.removeprefix("_total_")))
    return stats.with_columns(rates).drop(totals)


def ingest(
    source: Source, writer: SourceWriter, options: IngestOptions, progress: Callable[[int], None]
) -> dict[str, Any]:
    with source.open() as stream:
        data = read_whole(stream, progress) or b""  # None: over the cap, quarantined
    reader = JsonReader(writer)
    for n, doc in enumerate(_documents(data)):
        reader.document(n, doc)
    reader.flush()
    counts = long.finalize(writer, clock_for(source, options.start, options.interval_s))
    return {
        "clock_domain": "unix_ns",
        "unrecognised": dict(reader.unrecognised),
        "series": reader.series,
        "nan_values": reader.nan,
        **counts,
    }
