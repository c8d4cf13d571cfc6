"""The normalised dataset schema: every table, every column, its type, unit and meaning.

This module is the single source of truth. Ingesters conform their output to it
(`conform`), the dataset writes it, the DuckDB layer creates empty tables from it, and
`docs/SCHEMA.md` is rendered from it (`python -m traceq.schema > docs/SCHEMA.md`; a test
keeps the two in step).

Conventions (Perfetto / HTA style): timestamps `ts` / `t_*` are int64 nanoseconds since the
Unix epoch, UTC; durations `*_ns` are int64 nanoseconds; ratios are 0–1.
"""

from __future__ import annotations

import polars as pl

from traceq.schema_hops import HOP_TABLES, STITCHED
from traceq.schema_rollups import ROLLUP_DOC, ROLLUP_TABLES
from traceq.schema_types import BOOL, F64, I64, NS, STR, Column, _c

__all__ = [
    "DERIVED",
    "NS",
    "RAW_LIMIT",
    "SCHEMA_VERSION",
    "TABLES",
    "Column",
    "conform",
    "empty",
    "polars_schema",
    "render_markdown",
]

SCHEMA_VERSION = 2
"""2: `tokens` has `view` and `gap_ns` (docs/SCHEMA.md); version-1 datasets must be re-ingested.
Columns and tables added since read as null / empty from older files (traceq/columns.py)."""

TABLES: dict[str, tuple[Column, ...]] = {
    "requests": (
        _c("request_id", STR, "", "Request id as the producer printed it (vLLM `cmpl-…`)."),
        _c("source_id", STR, "", "Content hash of the source file this row came from."),
        _c("view", STR, "", "`server` (engine / API server) or `client` (load generator)."),
        _c("instance", STR, "", "Serving instance: OTel `service.instance.id`, host or name."),
        _c("model", STR, "", "Model name, when the source records it."),
        _c("t_arrival", I64, NS, "Request arrived (span start; client send time)."),
        _c("t_tokenized", I64, NS, "Tokenization finished (end of the tokenize span)."),
        _c("t_queued", I64, NS, "Request entered the scheduler's waiting queue."),
        _c("t_scheduled", I64, NS, "Request first scheduled (prefill started)."),
        _c("t_first_token", I64, NS, "First output token produced / received."),
        _c("t_last_token", I64, NS, "Last output token produced / received."),
        _c(
            "t_kv_transfer_start",
            I64,
            NS,
            "Disaggregated serving: KV-cache transfer to this server began (TensorRT-LLM "
            "`kv_cache_transfer_start` event, SGLang `decode_transferred` slice start).",
        ),
        _c("t_kv_transfer_end", I64, NS, "Disaggregated serving: KV-cache transfer finished."),
        _c("prompt_tokens", I64, "tokens", "Prompt (input) tokens."),
        _c("output_tokens", I64, "tokens", "Generated (output) tokens."),
        _c("cached_tokens", I64, "tokens", "Prompt tokens served from the prefix cache."),
        _c("max_tokens", I64, "tokens", "Requested `max_tokens`."),
        _c("finish_reason", STR, "", "`stop`, `length`, `abort`, … (first of several)."),
        _c("error", STR, "", "Error type or message; null when the request succeeded."),
        _c("n_preemptions", I64, "count", "Times the engine preempted this request."),
        _c("streaming", BOOL, "", "True when tokens were streamed (token timings exist)."),
        _c("time_resolution_ns", I64, "ns", "Resolution of the stamps (1 for OTel, 1e9 logs)."),
        _c(
            "run",
            STR,
            "",
            "Load-test run within a client source holding several (appended "
            "result, benchmark or experiment index; `stage N`); null otherwise.",
        ),
        _c("trace_id", STR, "", "OpenTelemetry trace id of the request's spans (hex); else null."),
        *STITCHED,
    ),
    "tokens": (
        _c("request_id", STR, "", "Request the chunk belongs to (`requests.request_id`)."),
        _c("source_id", STR, "", "Content hash of the source file."),
        _c("idx", I64, "", "0-based position of the chunk in its request, by time."),
        _c("ts", I64, NS, "Time the chunk was produced / received."),
        _c("n_tokens", I64, "tokens", "Tokens in the chunk (default 1)."),
        _c("t_scheduled", I64, NS, "The engine step that produced the chunk was scheduled."),
        _c("batch_size", I64, "requests", "Requests in that engine step's batch."),
        _c("waiting", I64, "requests", "Requests waiting in the scheduler at that step."),
        _c("total_tokens", I64, "tokens", "Engine-wide token count of that step (producer's)."),
        _c(
            "time_base",
            STR,
            "",
            "What the producer's stamps were relative to before traceq made them ns since the "
            "epoch: `epoch` (absolute), `span_start` (offsets from the request span start), "
            "`first_scheduled` (offsets from the first scheduled time); null for events.",
        ),
        _c("view", STR, "", "`server` or `client`: the view of the request row (`requests.view`)."),
        _c(
            "gap_ns",
            I64,
            "ns",
            "Time since the previous chunk of the same request row (TBT), computed once at "
            "ingest; null for the first chunk.",
        ),
    ),
    "spans": (
        _c("source_id", STR, "", "Content hash of the source file."),
        _c("trace_id", STR, "", "Trace id, lower-case hex."),
        _c("span_id", STR, "", "Span id, lower-case hex."),
        _c("parent_id", STR, "", "Parent span id (hex); null for a root span."),
        _c("name", STR, "", "Span name."),
        _c("kind", STR, "", "INTERNAL, SERVER, CLIENT, PRODUCER or CONSUMER."),
        _c("service", STR, "", "Resource `service.name`."),
        _c("t_start", I64, NS, "Span start."),
        _c("t_end", I64, NS, "Span end."),
        _c("status_code", STR, "", "UNSET, OK or ERROR."),
        _c("attributes", STR, "JSON", "Span attributes as a JSON object."),
        _c("request_id", STR, "", "Request this span describes or belongs to, if known."),
    ),
    "engine_stats": (
        _c("ts", I64, NS, "Time of the stats line / sample."),
        _c("source_id", STR, "", "Content hash of the source file."),
        _c("instance", STR, "", "Serving instance."),
        _c("engine", I64, "", "Engine index (`Engine 000:`), 0 when not printed."),
        _c("prompt_tps", F64, "tokens/s", "Prompt (prefill) throughput over the interval."),
        _c("gen_tps", F64, "tokens/s", "Generation (decode) throughput over the interval."),
        _c("running", I64, "requests", "Requests running in the engine."),
        _c("waiting", I64, "requests", "Requests waiting (V0 `Pending`, V1 `Waiting`)."),
        _c("swapped", I64, "requests", "Requests swapped to CPU (V0 only)."),
        _c("kv_usage", F64, "ratio 0-1", "GPU KV-cache usage."),
        _c("cpu_kv_usage", F64, "ratio 0-1", "CPU KV-cache usage (V0 only)."),
        _c("prefix_hit_rate", F64, "ratio 0-1", "Prefix-cache hit rate."),
        _c("throughput_tps", F64, "tokens/s", "Combined throughput (vLLM ≤ 0.2 `Throughput:`)."),
        _c("ext_prefix_hit_rate", F64, "ratio 0-1", "External (KV connector) prefix hit rate."),
        _c("mm_hit_rate", F64, "ratio 0-1", "Multimodal cache hit rate (vLLM V1)."),
        _c("batch", STR, "", "SGLang batch kind: `prefill` or `decode`."),
        _c("new_seqs", I64, "requests", "SGLang `#new-seq`: requests prefilled in the batch."),
        _c("new_tokens", I64, "tokens", "SGLang `#new-token`: prompt tokens computed."),
        _c("cached_tokens", I64, "tokens", "SGLang `#cached-token`: prompt tokens from cache."),
        _c("num_tokens", I64, "tokens", "SGLang `#token`: tokens held in the KV cache."),
        _c("cuda_graph", BOOL, "", "SGLang `cuda graph:` (decode ran in a CUDA graph)."),
        _c("ranks", STR, "", "SGLang rank prefix, e.g. `TP0` or `DP1 TP4`."),
        _c("process", STR, "", "Log process prefix, e.g. `EngineCore_DP0 pid=143`."),
        _c("line", I64, "", "Line number (1-based) of the record in its source log."),
    ),
    "events": (
        _c("ts", I64, NS, "Time of the event."),
        _c("source_id", STR, "", "Content hash of the source file."),
        _c("instance", STR, "", "Serving instance."),
        _c("kind", STR, "", "preemption, oom, startup_*, cuda_graph, error, otel:<name>, …"),
        _c("severity", STR, "", "DEBUG, INFO, WARNING, ERROR or CRITICAL."),
        _c("request_id", STR, "", "Request concerned, if any."),
        _c("value", F64, "", "Numeric payload (duration s, size GiB, count), per kind."),
        _c("message", STR, "", "Message text (never prompt text) or attributes JSON."),
        _c("process", STR, "", "Log process prefix, e.g. `APIServer pid=1`."),
        _c("line", I64, "", "Line number (1-based) of the record in its source log."),
    ),
    "gpu_samples": (
        _c("ts", I64, NS, "Sample time."),
        _c("source_id", STR, "", "Content hash of the source file."),
        _c("host", STR, "", "Host name / instance the GPU belongs to."),
        _c("gpu", I64, "", "GPU index on the host."),
        _c("uuid", STR, "", "GPU UUID."),
        _c("model_name", STR, "", "GPU model name."),
        _c("util_gpu", F64, "%", "GPU utilisation (nvidia-smi / DCGM_FI_DEV_GPU_UTIL)."),
        _c("util_mem", F64, "%", "Memory-controller utilisation."),
        _c("fb_used_mib", F64, "MiB", "Frame buffer in use."),
        _c("fb_total_mib", F64, "MiB", "Frame buffer total."),
        _c("power_w", F64, "W", "Power draw."),
        _c("temp_c", F64, "°C", "GPU temperature."),
        _c("sm_clock_mhz", F64, "MHz", "SM clock."),
        _c("sm_active", F64, "ratio 0-1", "DCGM PROF_SM_ACTIVE."),
        _c("sm_occupancy", F64, "ratio 0-1", "DCGM PROF_SM_OCCUPANCY."),
        _c("tensor_active", F64, "ratio 0-1", "DCGM PROF_PIPE_TENSOR_ACTIVE."),
        _c("dram_active", F64, "ratio 0-1", "DCGM PROF_DRAM_ACTIVE."),
        _c(
            "pcie_tx_bps",
            F64,
            "bytes/s",
            "PCIe transmit rate (DCGM PROF_PCIE_TX_BYTES, incl. headers).",
        ),
        _c(
            "pcie_rx_bps",
            F64,
            "bytes/s",
            "PCIe receive rate (DCGM PROF_PCIE_RX_BYTES, incl. headers).",
        ),
        _c("entity", STR, "", "DCGM entity kind: `GPU`, `GPU-I` / `GPU-CI` (MIG), `Switch`; GPU."),
        _c("pci_bus_id", STR, "", "PCI bus id, e.g. `00000000:37:00.0`."),
        _c("driver_version", STR, "", "Driver version, when the source prints it."),
        _c("mig_profile", STR, "", "MIG GPU-instance profile (`GPU_I_PROFILE`, e.g. `1g.5gb`)."),
        _c("mig_instance", I64, "", "MIG GPU-instance id (`GPU_I_ID`; dcgmi `GPU-I n`)."),
        _c("pod", STR, "", "Kubernetes pod using the GPU (dcgm-exporter pod mapping)."),
        _c("namespace", STR, "", "Kubernetes namespace of `pod`."),
        _c("container", STR, "", "Kubernetes container of `pod`."),
        _c("util_enc", F64, "%", "Encoder utilisation."),
        _c("util_dec", F64, "%", "Decoder utilisation."),
        _c("util_jpg", F64, "%", "JPEG engine utilisation (nvidia-smi dmon `jpg`)."),
        _c("util_ofa", F64, "%", "Optical-flow engine utilisation (nvidia-smi dmon `ofa`)."),
        _c("fb_free_mib", F64, "MiB", "Frame buffer free."),
        _c("fb_reserved_mib", F64, "MiB", "Frame buffer reserved by the driver."),
        _c("mem_temp_c", F64, "°C", "Memory (HBM) temperature; 0 on GPUs without a sensor."),
        _c("mem_clock_mhz", F64, "MHz", "Memory clock."),
        _c("pstate", I64, "", "Performance state (P0 = 0 … P12)."),
        _c("energy_mj", F64, "mJ", "Energy since driver load (DCGM TOTAL_ENERGY_CONSUMPTION)."),
        _c("xid", I64, "", "Last XID error (DCGM XID_ERRORS); 0 when none."),
        _c("gr_engine_active", F64, "ratio 0-1", "DCGM PROF_GR_ENGINE_ACTIVE."),
        _c("fp64_active", F64, "ratio 0-1", "DCGM PROF_PIPE_FP64_ACTIVE."),
        _c("fp32_active", F64, "ratio 0-1", "DCGM PROF_PIPE_FP32_ACTIVE."),
        _c("fp16_active", F64, "ratio 0-1", "DCGM PROF_PIPE_FP16_ACTIVE."),
        _c("nvlink_tx_bps", F64, "bytes/s", "NVLink transmit rate (DCGM PROF_NVLINK_TX_BYTES)."),
        _c("nvlink_rx_bps", F64, "bytes/s", "NVLink receive rate (DCGM PROF_NVLINK_RX_BYTES)."),
        _c(
            "pcie_tx_nvml_bps",
            F64,
            "bytes/s",
            "PCIe transmit rate from NVML: DCGM DEV_PCIE_TX_THROUGHPUT (a KB counter, turned "
            "into a rate between consecutive samples) or dmon `txpci` (MB/s). Never mixed with "
            "pcie_tx_bps.",
        ),
        _c(
            "pcie_rx_nvml_bps",
            F64,
            "bytes/s",
            "PCIe receive rate from NVML: DCGM DEV_PCIE_RX_THROUGHPUT (KB counter → rate) or "
            "dmon `rxpci` (MB/s).",
        ),
    ),
    "tool_metrics": (
        _c("source_id", STR, "", "Content hash of the source file."),
        _c("tool", STR, "", "Load-test tool that reported the figure."),
        _c("metric", STR, "", "The tool's own metric name."),
        _c("statistic", STR, "", "mean, p50, p99, …"),
        _c("value", F64, "", "Reported value."),
        _c("unit", STR, "", "Unit as reported."),
        _c("run", STR, "", "Run the figure covers (`requests.run`); null for the whole file."),
        _c(
            "run_source_id",
            STR,
            "",
            "source_id of the per-request file of the same run (the "
            "row's own source, or the sibling of a summary file); the crosswalk joins on it.",
        ),
    ),
    **HOP_TABLES,
    "quarantine": (
        _c("source_id", STR, "", "Content hash of the source file."),
        _c("location", STR, "", "Where in the source: `line 12`, `line 12 span 3`, `offset 40`."),
        _c("reason", STR, "", "Why the record was rejected."),
        _c("raw", STR, "", "The raw record, truncated to 512 characters."),
    ),
    **ROLLUP_TABLES,
}

DERIVED = tuple(ROLLUP_TABLES)
"""Tables traceq derives from a source's other tables when it lays them out (no reader writes
them; not counted in a source's `rows`)."""

RAW_LIMIT = 512


def polars_schema(table: str) -> pl.Schema:
    """The polars schema of one normalised table."""
    return pl.Schema({c.name: c.dtype for c in TABLES[table]})


def empty(table: str) -> pl.DataFrame:
    """An empty frame with the table's schema."""
    return pl.DataFrame(schema=polars_schema(table))


def conform(table: str, frame: pl.DataFrame) -> pl.DataFrame:
    """Cast and order `frame` to the table's schema; missing columns become null.

    Unknown columns are an error: a silently dropped column would be lost data.
    """
    schema = polars_schema(table)
    extra = set(frame.columns) - set(schema.names())
    if extra:
        msg = f"table {table!r} has no column(s) {sorted(extra)}"
        raise ValueError(msg)
    return frame.select(
        [
            (pl.col(name) if name in frame.columns else pl.lit(None)).cast(dtype).alias(name)
            for name, dtype in schema.items()
        ]
    )


def render_markdown() -> str:
    """The schema as the Markdown page `docs/SCHEMA.md`."""
    out = [
        "# Dataset schema",
        "",
        f"Schema version {SCHEMA_VERSION}. Generated from `traceq/schema.py` by",
        "`python -m traceq.schema > docs/SCHEMA.md`; do not edit by hand.",
        "",
        "Timestamps are int64 nanoseconds since the Unix epoch (UTC); ratios are 0–1.",
        "",
    ]
    for table, columns in TABLES.items():
        if table == DERIVED[0]:
            out += ROLLUP_DOC
        out += [f"## `{table}`", "", "| column | type | unit | meaning |", "|---|---|---|---|"]
        out += [f"| `{c.name}` | {c.dtype} | {c.unit} | {c.doc} |" for c in columns]
        out.append("")
    out += [
        "## `request_pick` (derived)",
        "",
        "Not read from any source: written by traceq whenever the dataset's list of sources",
        "changes (`traceq/pick.py`, `traceq/sql/request_pick.sql`), as",
        "`request_pick/<key>.parquet` named in `manifest.json`. One row per request id and",
        "view: the `requests` row kept for it (finest stamps, then the earliest ingested",
        "source), in arrival order, plus `copies` (rows of that request id and view across all",
        "sources) and `is_primary` (the row that stands for the request: the server row when",
        "there is one). `request_phases`, `token_gaps` and the KPIs read it, so copies of a",
        "request from several sources are counted once (docs/METRICS.md).",
        "",
        "## `kpis` (derived)",
        "",
        "Not read from any source: an ingest that leaves at least two million `tokens` rows",
        "stores the rows behind `kpi_latency` (`traceq/ingest/kpis.py`) as",
        "`kpis/<key>.parquet` named in `manifest.json`, where the key names every listed",
        "file, the views' SQL and the DuckDB version (`traceq/stored_kpis.py`).",
        "`kpi_latency` reads them back while the key matches and computes them from the files",
        "otherwise, with the same result.",
        "",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    print(render_markdown(), end="")
