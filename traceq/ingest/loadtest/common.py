"""Shared pieces of the load-test readers: the client request frame, chunk-time rebuilding,
tool_metrics rows, statistic names, quarantine rows and clock anchoring.

Every reader builds one *client frame* per run (columns of `CLIENT`, plus `chunk_offsets_ns`
or `chunk_ts`) and hands it to `write_client`, which writes `requests` (view = client) and
`tokens`. Prompt and output text is never copied: only counts and times.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from traceq.ingest.source import Source
from traceq.schema import RAW_LIMIT
from traceq.writer import SourceWriter

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000
TEXT_LIMIT = 48  # longer strings in quarantined records are replaced by their length

CLIENT = pl.Schema(
    {
        "request_id": pl.String,
        "run": pl.String,
        "model": pl.String,
        "t_arrival": pl.Int64,
        "t_first_token": pl.Int64,
        "t_last_token": pl.Int64,
        "prompt_tokens": pl.Int64,
        "output_tokens": pl.Int64,
        "max_tokens": pl.Int64,
        "finish_reason": pl.String,
        "error": pl.String,
        "streaming": pl.Boolean,
        "time_resolution_ns": pl.Int64,
    }
)

# Statistic names as the tools spell them → ours (mean, p50, p99, p99.9, std, …).
_STAT_ALIASES = {
    "avg": "mean",
    "mean": "mean",
    "median": "p50",
    "std": "std",
    "std_dev": "std",
    "stddev": "std",
    "min": "min",
    "max": "max",
    "count": "count",
    "sum": "sum",
    "total_sum": "sum",
    "variance": "variance",
    "mode": "mode",
    "value": "value",
    "rate": "rate",
}
_PCT = re.compile(r"^p(\d+(?:\.\d+)?)$")
_GUIDELLM_PCT = re.compile(r"^p(0\d+|\d{3})$")  # guidellm: p001 = 0.1 %, p01 = 1 %, p999


def stat_name(raw: str) -> str | None:
    """Our statistic name for a tool's (`avg` → mean, `median` → p50, `p001` → p0.1)."""
    key = raw.strip().lower()
    if key in _STAT_ALIASES:
        return _STAT_ALIASES[key]
    if _GUIDELLM_PCT.match(key):
        digits = key[1:]
        value = int(digits) / 10 ** (len(digits) - 2)
        return f"p{value:g}"
    m = _PCT.match(key)
    if m:
        return f"p{float(m.group(1)):g}"
    return None


@dataclass
class Run:
    """What one reader extracted from one source."""

    clock_domain: str
    client: list[pl.DataFrame] = field(default_factory=list)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    quarantine: list[dict[str, str]] = field(default_factory=list)
    assumptions: dict[str, Any] = field(default_factory=dict)
    unrecognised: dict[str, int] = field(default_factory=dict)
    records: dict[str, int] = field(default_factory=dict)
    run_source_id: str | None = None

    def metric(
        self,
        tool: str,
        metric: str,
        statistic: str,
        value: Any,
        unit: str | None,
        run: str | None = None,
    ) -> None:
        """Keep one figure the tool reported; non-numbers and NaN are skipped."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return
        if isinstance(value, float) and not math.isfinite(value):
            return
        self.metrics.append(
            {
                "tool": tool,
                "metric": metric,
                "statistic": statistic,
                "value": float(value),
                "unit": unit,
                "run": run,
            }
        )

    def distribution(
        self, tool: str, metric: str, stats: dict[str, Any], unit: str | None, run: str | None
    ) -> None:
        """Keep every statistic of a `{mean, median, p99, …}` dict under our names (once:
        guidellm gives both `median` and `p50`)."""
        seen: set[str] = set()
        for key, value in stats.items():
            name = stat_name(key)
            if name is not None and name not in seen:
                seen.add(name)
                self.metric(tool, metric, name, value, unit, run)

    def reject(self, location: str, reason: str, raw: Any) -> None:
        self.quarantine.append({"location": location, "reason": reason, "raw": redact(raw)})

    def unknown(self, kind: str, n: int = 1) -> None:
        self.unrecognised[kind] = self.unrecognised.get(kind, 0) + n


def redact(raw: Any) -> str:
    """A record for the quarantine: long strings (prompts, outputs) become `<N chars>`."""
    if isinstance(raw, bytes):
        try:
            raw = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw[:RAW_LIMIT].decode("utf-8", "replace")
    text = orjson.dumps(_redact(raw), option=orjson.OPT_SERIALIZE_NUMPY).decode()
    return text[:RAW_LIMIT]


def _redact(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= TEXT_LIMIT else f"<{len(value)} chars>"
    if isinstance(value, dict):
        return {k: _redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v) for v in value[:32]] + (
            [f"<{len(value) - 32} more>"] if len(value) > 32 else []
        )
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def content_id(*parts: Any) -> str:
    """16 hex digits naming a run by what it records, not by the file that carries it.

    Tools that print no request id (vLLM bench, llmperf) get request ids `<content_id>:<index>`
    from the fields that identify their requests: a copy of the export under another name,
    gzipped, re-indented or appended to another file gives the same ids, so the request pick
    (traceq/pick.py) counts its requests once, as it does for copies of server traces."""
    # json, not orjson: it takes integers past 64 bits and NaN as they were parsed
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def anchor(ns: pl.Expr, origin: int | None, t0: int | None) -> pl.Expr:
    """A relative-clock stamp (ns) moved so that `origin` lands on `t0`; unchanged without t0."""
    if t0 is None or origin is None:
        return ns
    return ns - origin + t0


def seconds_to_ns(col: str | pl.Expr) -> pl.Expr:
    expr = pl.col(col) if isinstance(col, str) else col
    return (expr.cast(pl.Float64) * NS_PER_S).round().cast(pl.Int64)


def ms_to_ns(col: str | pl.Expr) -> pl.Expr:
    expr = pl.col(col) if isinstance(col, str) else col
    return (expr.cast(pl.Float64) * NS_PER_MS).round().cast(pl.Int64)


def valid_latency(expr: pl.Expr) -> pl.Expr:
    """Null for NaN / infinite / negative latencies (they stay visible as nulls, never as 0)."""
    return pl.when(expr.is_finite() & (expr >= 0)).then(expr).otherwise(None)


def gaps_to_offsets(gaps: pl.Expr, scale: float) -> pl.Expr:
    """Chunk offsets from the first token (ns): 0, then the running sum of the gaps."""
    return (
        pl.concat_list(pl.lit(0.0), gaps.cast(pl.List(pl.Float64)))
        .list.eval((pl.element().cum_sum() * scale).round().cast(pl.Int64))
        .alias("chunk_offsets_ns")
    )


def write_client(writer: SourceWriter, frame: pl.DataFrame) -> None:
    """Write a client frame: `requests` rows and, from `chunk_offsets_ns` (relative to the
    first token) or `chunk_ts` (absolute) plus optional `chunk_tokens`, the `tokens` rows.

    A chunk's `n_tokens` is its own count when the tool recorded one, else 1 when the request
    has exactly as many chunks as output tokens, else null (unknown split)."""
    if frame.height == 0:
        return
    requests = frame.select([c for c in CLIENT.names() if c in frame.columns]).with_columns(
        view=pl.lit("client")
    )
    writer.write("requests", requests)
    if "chunk_offsets_ns" in frame.columns:
        chunks = frame.select(
            "request_id",
            "output_tokens",
            ts=pl.col("chunk_offsets_ns").list.eval(pl.element()) + pl.col("t_first_token"),
            n=pl.col("chunk_offsets_ns").list.len(),
            per=pl.lit(None, pl.List(pl.Int64)),
        )
    elif "chunk_ts" in frame.columns:
        per = frame["chunk_tokens"] if "chunk_tokens" in frame.columns else None
        chunks = frame.select(
            "request_id",
            "output_tokens",
            ts="chunk_ts",
            n=pl.col("chunk_ts").list.len(),
            per=per if per is not None else pl.lit(None, pl.List(pl.Int64)),
        )
    else:
        return
    chunks = chunks.filter(pl.col("n") > 0)
    if chunks.height == 0:
        return
    tokens = (
        chunks.with_columns(
            idx=pl.int_ranges(0, pl.col("n")), _row=pl.int_range(pl.len(), dtype=pl.Int64)
        )
        .with_columns(
            per=pl.when(pl.col("per").list.len() == pl.col("n"))
            .then("per")
            .otherwise(pl.col("idx").list.eval(pl.element() * pl.lit(None, pl.Int64)))
        )
        .explode("ts", "idx", "per")
        .select(
            "request_id",
            "_row",
            "idx",
            "ts",
            n_tokens=pl.coalesce(
                "per",
                pl.when(pl.col("n") == pl.col("output_tokens")).then(pl.lit(1, pl.Int64)),
            ),
        )
        .drop_nulls("ts")
        .with_columns(
            view=pl.lit("client"),
            # TBT, once here rather than in every query (token_gaps is a projection of it):
            # a request row's chunks are adjacent and in idx order after the explode.
            gap_ns=pl.when(pl.col("_row") == pl.col("_row").shift(1)).then(pl.col("ts").diff()),
        )
        .drop("_row")
    )
    writer.write("tokens", tokens)


def client_frame(columns: dict[str, Any], **extra: pl.Series | list) -> pl.DataFrame:
    """A frame with the CLIENT columns given (others null) plus extra columns."""
    data = {name: columns.get(name) for name in CLIENT.names()}
    height = max((len(v) for v in data.values() if v is not None), default=0)
    frame = pl.DataFrame(
        {
            name: (
                pl.Series(name, v, dtype=CLIENT[name], strict=False)
                if v is not None
                else pl.Series(name, [None] * height, dtype=CLIENT[name])
            )
            for name, v in data.items()
        }
    )
    return frame.with_columns(
        **{k: pl.Series(k, v) if isinstance(v, list) else v for k, v in extra.items()}
    )


def sibling_source_id(source: Source, pattern: str, replacement: str) -> str | None:
    """source_id of the per-request file that sits next to a summary file, if it exists.

    The summary's file name with `pattern` replaced (regex) names the sibling; the crosswalk
    joins the tool's summary figures to our statistics of that file through it."""
    name = source.path.name
    other = re.sub(pattern, replacement, name)
    if other == name:
        return None
    for candidate in (other, other + ".gz", other + ".zst"):
        path = Path(source.path.parent, candidate)
        if path.is_file():
            return Source(path).source_id
    return None


def load_json(data: bytes, run: Run, location: str = "file") -> Any:
    """The parsed document, or None with a quarantine row saying why (truncated / not JSON).

    Python's json module writes NaN / Infinity, which strict JSON (orjson) rejects; such
    files are read with the standard library instead. A truncated top-level array keeps the
    complete records before the cut (the rest is quarantined)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        error = exc
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        pass
    text = data.strip()
    if text[-1:] in (b"}", b"]"):
        run.reject(location, f"not valid JSON: {error}", data[:RAW_LIMIT])
        return None
    salvaged = _salvage_array(text)
    if salvaged is not None:
        records, cut = salvaged
        run.reject(
            f"offset {cut}",
            "truncated JSON array: the records after this offset are cut off",
            text[cut:],
        )
        return records
    run.reject(location, f"truncated JSON document (ends early): {error}", data[:RAW_LIMIT])
    return None


def _salvage_array(text: bytes, attempts: int = 64) -> tuple[list, int] | None:
    """The complete objects of a cut-off JSON array and the offset where the cut one starts."""
    if not text.startswith(b"["):
        return None
    end = len(text)
    for _ in range(attempts):
        end = text.rfind(b"}", 0, end)
        if end < 0:
            return None
        try:
            records = orjson.loads(text[: end + 1] + b"]")
        except orjson.JSONDecodeError:
            continue
        if isinstance(records, list):
            cut = text.find(b"{", end + 1)
            return records, cut if cut >= 0 else end + 1
    return None


def records_frame(records: list[Any], schema: pl.Schema, run: Run, where: str) -> pl.DataFrame:
    """The records as a frame with the given schema plus `i` (their index in `records`).

    Items that are not objects, or whose fields polars cannot read with the schema, go to the
    quarantine one by one; the whole list is read in one go when it can be."""
    index = [i for i, r in enumerate(records) if isinstance(r, dict)]
    for i, r in enumerate(records):
        if not isinstance(r, dict):
            run.reject(f"{where} {i}", "not a JSON object", r)
    try:
        frame = pl.from_dicts([records[i] for i in index], schema=schema, strict=False)
    except Exception:
        keep = []
        for i in index:
            try:
                pl.from_dicts([records[i]], schema=schema, strict=False)
            except Exception as exc:
                run.reject(
                    f"{where} {i}", f"fields of unexpected types: {str(exc)[:160]}", records[i]
                )
                continue
            keep.append(i)
        index = keep
        frame = pl.from_dicts([records[i] for i in index], schema=schema, strict=False)
    return frame.with_columns(i=pl.Series(index, dtype=pl.UInt32))
