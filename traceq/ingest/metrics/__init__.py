"""Prometheus text exposition of a serving engine (a `/metrics` scrape of vLLM or SGLang) →
engine_stats and preemption events.

Parsed with `prometheus_client`'s text parser (the reference implementation, not a regex of
our own). A file holds one scrape or several concatenated; a timestamp line before each
(`# ts=<ISO>`, `# <ISO>`, a bare ISO / epoch line, as `traceq/ingest/gpu/dcgm.py` accepts)
or per-sample exposition timestamps (ms) give their time. Without either, the k-th
occurrence of a series is scrape k, placed by `--start` / `--interval` or the file's mtime
(`gpu/common.clock_for`), with the assumption printed.

Gauges map onto engine_stats columns (`GAUGES`); token counters become rates between
consecutive scrapes of the same instance and engine, prefix-cache counters a hit rate over
the interval; a rise of the preemption counter is a `preemption` event (value: the cumulative
count, as the log's preemption warnings). Every other sample is counted by metric name in
the manifest (`unrecognised`); a line the parser rejects is quarantined.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import polars as pl
from prometheus_client.parser import text_string_to_metric_families

from traceq.ingest.gpu.common import clock_for, parse_iso_ns
from traceq.ingest.gpu.dcgm import SEPARATOR
from traceq.ingest.source import Source
from traceq.schema import RAW_LIMIT
from traceq.writer import SourceWriter

if TYPE_CHECKING:
    from traceq.ingest.options import IngestOptions

FORMATS = {
    "engine-metrics": "vLLM / SGLang Prometheus /metrics text: one scrape or concatenated scrapes",
}
# Gauge → engine_stats column: vLLM's V0 names (vllm/engine/metrics.py) and V1 names
# (vllm/v1/metrics/loggers.py), SGLang's `sglang:` names.
GAUGES = {
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:num_requests_swapped": "swapped",
    "vllm:gpu_cache_usage_perc": "kv_usage",  # ≤ 0.9
    "vllm:kv_cache_usage_perc": "kv_usage",  # ≥ 0.9
    "vllm:cpu_cache_usage_perc": "cpu_kv_usage",
    "vllm:gpu_prefix_cache_hit_rate": "prefix_hit_rate",  # V0 gauge; -1 means disabled
    "vllm:avg_prompt_throughput_toks_per_s": "prompt_tps",  # V0 gauges
    "vllm:avg_generation_throughput_toks_per_s": "gen_tps",
    "sglang:num_running_reqs": "running",
    "sglang:num_queue_reqs": "waiting",
    "sglang:token_usage": "kv_usage",
    "sglang:cache_hit_rate": "prefix_hit_rate",
    "sglang:gen_throughput": "gen_tps",
}
# Counter → name of its cumulative column (rates and hit rates are taken from these).
COUNTERS = {
    "vllm:prompt_tokens_total": "prompt_tokens",
    "vllm:generation_tokens_total": "generation_tokens",
    "vllm:prefix_cache_queries_total": "prefix_queries",  # ≥ 0.9, in tokens
    "vllm:prefix_cache_hits_total": "prefix_hits",
    "vllm:gpu_prefix_cache_queries_total": "prefix_queries",  # early V1 names
    "vllm:gpu_prefix_cache_hits_total": "prefix_hits",
    "vllm:num_preemptions_total": "preemptions",
    "sglang:num_retracted_reqs": "preemptions",
}
_INT_COLUMNS = ("running", "waiting", "swapped")
_SNIFF = re.compile(rb"(?m)^(?:# (?:HELP|TYPE) )?(?:vllm|sglang):[a-z_]+")
_SEPARATOR = re.compile(SEPARATOR)


def sniff(source: Source) -> str | None:
    """`engine-metrics` when the head has a `vllm:` / `sglang:` sample or metadata line."""
    return "engine-metrics" if _SNIFF.search(source.head) else None


def ingest(
    source: Source,
    writer: SourceWriter,
    fmt: str,
    options: IngestOptions,
    progress: Callable[[int], None],
) -> dict[str, Any]:
    """Read one exposition file into `writer`; returns manifest details."""
    with source.open() as stream:
        data = stream.read()
    progress(len(data))
    lines = data.decode("utf-8", "replace").splitlines()
    samples: list[tuple[int, str | None, str, str, str, float, float | None]] = []
    unrecognised: Counter[str] = Counter()
    bad: list[dict[str, str]] = []
    for scrape, stamp, first, chunk in _scrapes(lines):
        for name, labels, value, ts in _parse(chunk, first, bad):
            column = GAUGES.get(name) or COUNTERS.get(name)
            if column is None:
                unrecognised[name] += 1
                continue
            instance = labels.get("instance", "")
            samples.append((scrape, stamp, column, instance, labels.get("engine", "0"), value, ts))
    if bad:
        writer.write("quarantine", pl.DataFrame(bad))
    entry: dict[str, Any] = {
        "clock_domain": "unix_ns",
        "records": {"samples": len(samples) + sum(unrecognised.values()), "scrapes": 0},
        "unrecognised": dict(sorted(unrecognised.items())),
    }
    if samples:
        frame = _timed(_frame(samples, source), source, options, entry)
        entry["records"]["scrapes"] = frame["ts"].n_unique()
        stats, events = _rows(frame)
        writer.write("engine_stats", stats)
        writer.write("events", events)
    return entry


def _scrapes(lines: list[str]) -> Iterator[tuple[int, str | None, int, list[str]]]:
    """(scrape number, its timestamp line's time text, first line number, lines) per scrape
    between timestamp lines (the whole file when there are none)."""
    scrape, stamp, first = 0, None, 1
    chunk: list[str] = []
    for n, line in enumerate(lines, 1):
        hit = _SEPARATOR.match(line)
        if hit:
            if chunk:
                yield scrape, stamp, first, chunk
                scrape += 1
            stamp, first, chunk = hit.group("t"), n + 1, []
        else:
            chunk.append(line)
    if chunk:
        yield scrape, stamp, first, chunk


def _parse(
    chunk: list[str], first: int, bad: list[dict[str, str]]
) -> Iterator[tuple[str, dict[str, str], float, float | None]]:
    """(sample name, labels, value, timestamp s) of one scrape. A scrape the parser rejects
    is parsed line by line: only the lines it rejects are quarantined."""
    try:
        families = list(text_string_to_metric_families("\n".join(chunk) + "\n"))
    except ValueError:
        families = []
        for n, line in enumerate(chunk, first):
            if not line.strip() or line.startswith("#"):
                continue
            try:
                families += text_string_to_metric_families(line + "\n")
            except ValueError as exc:
                reason = f"not a Prometheus exposition line ({exc})"[:RAW_LIMIT]
                bad.append({"location": f"line {n}", "reason": reason, "raw": line[:RAW_LIMIT]})
    for family in families:
        for s in family.samples:
            ts = float(s.timestamp) if s.timestamp is not None else None
            yield s.name, s.labels, float(s.value), ts


def _frame(samples: list[tuple], source: Source) -> pl.DataFrame:
    frame = pl.DataFrame(
        samples,
        schema={
            "scrape": pl.Int64,
            "stamp": pl.String,
            "column": pl.String,
            "instance": pl.String,
            "engine": pl.String,
            "value": pl.Float64,
            "sample_s": pl.Float64,
        },
        orient="row",
    )
    return frame.with_columns(
        instance=pl.when(pl.col("instance") == "")
        .then(pl.lit(source.path.name))
        .otherwise("instance"),
        engine=pl.col("engine").cast(pl.Int64, strict=False).fill_null(0),
        # the k-th time a series appears in its scrape: scrape k of a file without stamps
        k=pl.int_range(pl.len()).over("scrape", "column", "instance", "engine"),
    )


def _timed(
    frame: pl.DataFrame, source: Source, options: IngestOptions, entry: dict[str, Any]
) -> pl.DataFrame:
    """`ts` of every sample: its exposition stamp, else its timestamp line, else the clock."""
    own = (pl.col("sample_s") * 1e3).round().cast(pl.Int64) * 1_000_000
    frame = frame.with_columns(ts=pl.coalesce(own, parse_iso_ns(pl.col("stamp"), options.tz)))
    if frame["ts"].null_count():
        clock = clock_for(source, options.start, options.interval_s)
        step = pl.col("scrape") + pl.col("k")
        last = int(frame.select(step.max()).item())
        placed = clock.anchor(last) + step * clock.interval_ns
        frame = frame.with_columns(ts=pl.coalesce("ts", placed))
        entry["clock_domain"] = "assumed_interval"
        entry["assumptions"] = clock.assumptions
    return frame


def _rows(frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """engine_stats rows (one per time, instance, engine) and preemption events."""
    key = ["ts", "instance", "engine"]
    wide = frame.pivot("column", index=key, values="value", aggregate_function="first")
    wide = wide.sort("instance", "engine", "ts")
    for name in (*GAUGES.values(), *COUNTERS.values()):
        if name not in wide.columns:
            wide = wide.with_columns(pl.lit(None, pl.Float64).alias(name))
    series = ["instance", "engine"]
    dt_s = pl.col("ts").diff().over(series) / 1e9

    def rise(c: str) -> pl.Expr:
        d = pl.col(c).diff().over(series)
        return pl.when(d >= 0).then(d)  # null after a counter reset

    hit_rate = pl.when(rise("prefix_queries") > 0).then(
        rise("prefix_hits") / rise("prefix_queries")
    )
    stats = wide.with_columns(
        prompt_tps=pl.coalesce(pl.when(dt_s > 0).then(rise("prompt_tokens") / dt_s), "prompt_tps"),
        gen_tps=pl.coalesce(pl.when(dt_s > 0).then(rise("generation_tokens") / dt_s), "gen_tps"),
        prefix_hit_rate=pl.coalesce(
            hit_rate, pl.when(pl.col("prefix_hit_rate") >= 0).then("prefix_hit_rate")
        ),
        **{c: pl.col(c).cast(pl.Int64) for c in _INT_COLUMNS},
    )
    preempted = stats.filter(rise("preemptions") > 0).select(
        "ts",
        "instance",
        kind=pl.lit("preemption"),
        value="preemptions",
        message=pl.lit("cumulative preemptions (Prometheus counter)"),
    )
    drop = sorted(set(COUNTERS.values()))
    return stats.drop(drop), preempted
