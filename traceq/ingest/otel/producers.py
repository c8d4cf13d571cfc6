"""What the span split needs to know about particular producers: event names that mean
preemption or scheduling, vLLM start-up spans, and which producer conventions a block matched
(docs/INGEST.md, "Producers"; research notes `otel_producers.md` cite the sources)."""

from __future__ import annotations

import polars as pl

# vLLM start-up spans (its loading / start-up tracing) -> the event kinds the log reader
# uses for the same milestones (traceq/ingest/serverlog/events.py); others: startup_span_s.
STARTUP_KINDS = {
    "Load weights": "startup_weights_load_s",
    "Loading (GPU)": "startup_weights_load_s",
    "Loading (CPU)": "startup_weights_load_s",
    "Loading (NPU)": "startup_weights_load_s",
    "Load model": "startup_model_load_s",
    "vllm.engine_core.model_runner.load_model": "startup_model_load_s",
    "Compile graph": "startup_torch_compile_s",
    "Compile/warmup": "startup_compile_warmup_s",
    "Capture model": "cuda_graph",
    "Prepare model": "startup_kv_profile_s",
    "vllm.engine_core.model_runner.profile_run": "startup_kv_profile_s",
    "Overall Loading": "startup_loading_s",
    "vllm.startup": "startup_loading_s",
    "Executor init": "startup_executor_init_s",
    "Worker init": "startup_worker_init_s",
    "Initialize model": "startup_model_init_s",
    "API server setup": "startup_api_server_s",
}
# Span event names -> traceq event kinds (research §6.3); others stay `otel:<name>`.
# vLLM's `EngineCoreEventType` (vllm/v1/engine/__init__.py: QUEUED = 1, SCHEDULED = 2,
# PREEMPTED = 3) reaches the span as a name whose spelling the PR branch did not pin: the
# member name in any case (`.name`), or `str()` of the member before Python 3.11
# (`EngineCoreEventType.QUEUED`), with or without a `vllm.` / `engine_core.` prefix.
_ENGINE_EVENT = (
    r"(?i)^(?:vllm[._])?(?:engine_?core[._]?)?(?:event(?:_?type)?[._])?"
    r"(queued|scheduled|preempted)$"
)


def event_kind(name: pl.Expr) -> pl.Expr:
    """traceq event kind of a span event: preemptions and scheduling by their meaning."""
    engine = name.str.extract(_ENGINE_EVENT, 1).str.to_lowercase()
    return (
        pl.when(name == "retract")  # SGLang: evicted back to the wait queue
        .then(pl.lit("preemption"))
        .when(name == "schedule")  # SGLang: put in a batch
        .then(pl.lit("scheduled"))
        .when(engine == "preempted")
        .then(pl.lit("preemption"))
        .when(engine.is_not_null())
        .then(engine)
        .otherwise(pl.format("otel:{}", name))
    )


def startup_events(spans: pl.DataFrame, lifted: pl.DataFrame) -> pl.DataFrame:
    """Start-up spans as events with their duration (s), ts = span end, like log milestones."""
    startup = spans.select("_span", "name", "t_start", "t_end").join(
        lifted.select("_span", "a_code_function"), on="_span", how="left"
    )
    startup = startup.filter(
        pl.col("a_code_function").is_not_null() | pl.col("name").is_in(list(STARTUP_KINDS))
    )
    return startup.select(
        "_span",
        ts=pl.col("t_end"),
        kind=pl.col("name").replace_strict(STARTUP_KINDS, default="startup_span_s"),
        value=(pl.col("t_end") - pl.col("t_start")) / 1e9,
        message=pl.col("name"),
    )


def conventions_seen(parts: dict[str, pl.DataFrame]) -> dict[str, int]:
    """Which producer conventions (`PRODUCERS` in traceq/ingest/otel/__init__.py) a block of
    spans matched, with how many request spans (start-up: spans) matched each."""
    staged, tokens, events = parts["spans"], parts["tokens"], parts["events"]
    name = pl.col("name")
    # TensorRT-LLM names its request span `llm_request` too (executor/result.py `do_tracing`)
    # and always sets gen_ai.latency.kv_cache_transfer_time (0.0 without a transfer)
    kv = events.filter(pl.col("kind").str.starts_with("otel:kv_cache_transfer"))["_span"]
    trt = pl.col("_span").is_in(kv.implode()) | pl.col("a_kv_transfer_s").is_not_null()
    n = staged.select(
        vllm=((name == "llm_request") & ~trt).sum(),
        sglang=(pl.col("a_rid").is_not_null() & pl.col("is_request")).sum(),
        vllm_omni=(name == "omni_request").sum(),
        vllm_startup=pl.col("a_code_function").is_not_null().sum(),
        tensorrt_llm=trt.sum(),
    ).row(0, named=True)
    first = tokens.group_by("_span").agg(
        pl.col("time_base").first(), stepped=pl.col("t_scheduled").is_not_null().any()
    )
    epoch = first["time_base"] == "epoch"
    n["vllm_token_events"] = int((epoch & first["stepped"]).sum())
    n["gen_ai_token_events"] = int((epoch & ~first["stepped"]).sum())
    n["token_arrays"] = int((~epoch).sum())
    return {k.replace("_", "-"): int(v) for k, v in n.items() if v}
