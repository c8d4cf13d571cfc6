"""GPU telemetry: nvidia-smi (query CSV, dmon) and DCGM (dcgm-exporter scrapes, Prometheus
HTTP API JSON, dcgmi dmon) → gpu_samples.

One row per GPU (or MIG instance) per sample, in the units `traceq/schema.py` documents:
utilisation in percent, PROF_* activities as ratios 0–1, memory in MiB, power in W, clocks in
MHz, PCIe / NVLink in bytes per second. Sources without a clock (dmon without `-o DT`,
`dcgmi dmon`, a single scrape) take `--start` / `--interval`, else the file mtime, and say so
in the manifest's `assumptions`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from traceq.ingest.gpu import dcgm, prom_json, smi_csv, smi_dmon
from traceq.ingest.source import Source
from traceq.writer import SourceWriter

if TYPE_CHECKING:
    from traceq.ingest.options import IngestOptions

FORMATS = {
    "nvidia-smi-csv": "nvidia-smi --query-gpu CSV (with or without header / units)",
    "nvidia-smi-dmon": "nvidia-smi dmon text (any -s selection, with or without -o DT)",
    "dcgm-prom": "dcgm-exporter Prometheus text: one scrape or concatenated scrapes",
    "prom-json": "Prometheus HTTP API query_range / query JSON (DCGM and vLLM metrics)",
    "dcgmi-dmon": "dcgmi dmon text output (#Entity / ID header)",
}


def sniff(source: Source) -> str | None:
    """The GPU telemetry format of `source`, judged from its first bytes, or None."""
    head = source.head
    if prom_json.sniff(head):
        return "prom-json"
    if dcgm.sniff_dcgmi(head):
        return "dcgmi-dmon"
    if dcgm.sniff_prom(head):
        return "dcgm-prom"
    if smi_dmon.sniff(head):
        return "nvidia-smi-dmon"
    if smi_csv.sniff(head):
        return "nvidia-smi-csv"
    return None


def ingest(
    source: Source,
    writer: SourceWriter,
    fmt: str,
    options: IngestOptions,
    progress: Callable[[int], None],
) -> dict[str, Any]:
    """Read `source` in format `fmt` into `writer`; returns manifest details."""
    readers = {
        "nvidia-smi-csv": smi_csv.ingest,
        "nvidia-smi-dmon": smi_dmon.ingest,
        "dcgm-prom": dcgm.ingest_prom,
        "prom-json": prom_json.ingest,
        "dcgmi-dmon": dcgm.ingest_dcgmi,
    }
    return readers[fmt](source, writer, options, progress)
