"""Load-test exports → client-side `requests` (view = client), `tokens` and `tool_metrics`.

One format name per tool; each covers the tool's per-request file and its summary files:

- `vllm-bench`: `vllm bench serve` result JSON (detailed or not, `--append-result` lines);
- `genai-perf`: `profile_export.json` (+ `profile_export_genai_perf.json` / `.csv`);
- `aiperf`: `profile_export.jsonl` (+ `profile_export_aiperf.json` / `.csv`);
- `inference-perf`: `per_request_lifecycle_metrics.json` (+ summary / stage / prometheus JSON);
- `guidellm`: `benchmarks.json`;
- `llmperf`: `*_individual_responses.json` (+ `*_summary.json`).

Each tool's own summary figures go to `tool_metrics` under its own names (statistics renamed to
ours: avg → mean, median → p50); the `crosswalk` view sets them next to our recomputation.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import polars as pl

from traceq.ingest.blocks import read_whole
from traceq.ingest.loadtest import aiperf, genai_perf, guidellm, inference_perf, llmperf, vllm_bench
from traceq.ingest.loadtest.common import Run, write_client
from traceq.ingest.source import Source
from traceq.writer import SourceWriter

if TYPE_CHECKING:
    from traceq.ingest.options import IngestOptions

FORMATS = {
    "vllm-bench": "vllm bench serve --save-result JSON (detailed, non-detailed, appended)",
    "genai-perf": "GenAI-Perf profile_export.json, profile_export_genai_perf.json / .csv",
    "aiperf": "AIPerf profile_export.jsonl, profile_export_aiperf.json / .csv",
    "inference-perf": "inference-perf per-request and summary lifecycle / prometheus JSON",
    "guidellm": "guidellm benchmarks.json",
    "llmperf": "llmperf *_individual_responses.json and *_summary.json",
}
_READERS = {
    "vllm-bench": vllm_bench.read,
    "genai-perf": genai_perf.read,
    "aiperf": aiperf.read,
    "inference-perf": inference_perf.read,
    "guidellm": guidellm.read,
    "llmperf": llmperf.read,
}
# Keys of other families' JSON: never claim those files.
_FOREIGN = (b'"resourceSpans"', b'"traceID"', b'"batches"')
_JSON_START = re.compile(rb"\{|\[\s*(?:[\[\]{\"0-9-]|true\b|false\b|null\b|$)")
"""The start of a JSON document: a tool's console log whose first line is `[transformers] …`
or `[INFO] …` opens with a bracket too, and echoes its JSON's key names further on."""


def sniff(source: Source) -> str | None:
    """The load-test tool that wrote `source`, judged from its first bytes, or None."""
    head = source.head
    text = head.lstrip()
    name = source.path.name
    if not _JSON_START.match(text):
        if aiperf.looks_like_csv(text, name):
            return "aiperf"
        if genai_perf.looks_like_csv(text, name):
            return "genai-perf"
        return None
    if any(key in head for key in _FOREIGN):
        return None
    for fmt, module in (
        ("aiperf", aiperf),
        ("genai-perf", genai_perf),
        ("guidellm", guidellm),
        ("inference-perf", inference_perf),
        ("llmperf", llmperf),
        ("vllm-bench", vllm_bench),
    ):
        if module.looks_like(head):
            return fmt
    return None


def ingest(
    source: Source,
    writer: SourceWriter,
    fmt: str,
    options: IngestOptions,
    progress: Callable[[int], None],
) -> dict[str, Any]:
    """Read one load-test export; returns the manifest details."""
    with source.open() as stream:
        if fmt == "aiperf" and aiperf.is_jsonl(source.head):
            run = Run(clock_domain="unix_ns")
            n = 0
            for frame in aiperf.iter_requests(stream, run, source.source_id, progress):
                write_client(writer, frame)
                n += frame.height
                _flush_quarantine(writer, run)
            run.records = {"requests": n}
        else:
            # Per-run JSON documents (a few MB): parsed whole, up to the line cap.
            data = read_whole(stream, progress)
            run = (
                Run(clock_domain="unix_ns")
                if data is None
                else _READERS[fmt](data, options, source)
            )
    for frame in run.client:
        write_client(writer, frame)
    if run.metrics:
        rows = pl.DataFrame(run.metrics).with_columns(
            run_source_id=pl.lit(run.run_source_id or writer.source_id)
        )
        writer.write("tool_metrics", rows)
    _flush_quarantine(writer, run)
    entry: dict[str, Any] = {"clock_domain": run.clock_domain, "tool": fmt}
    if run.assumptions:
        entry["assumptions"] = run.assumptions
    if run.unrecognised:
        entry["unrecognised"] = run.unrecognised
    if run.records:
        entry["records"] = run.records
    return entry


def _flush_quarantine(writer: SourceWriter, run: Run) -> None:
    if run.quarantine:
        writer.write("quarantine", pl.DataFrame(run.quarantine))
        run.quarantine.clear()
