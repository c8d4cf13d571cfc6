"""Log records → `events`: startup milestones, preemptions, request lifecycle, HTTP access,
warnings, errors, OOM and engine death.

`categories.categorise` gives every record exactly one category; `extract` turns each
category into event rows, lifecycle rows (for the coarse `requests` rows) or quarantine rows.
What remains is counted by category in the manifest.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from traceq.ingest.serverlog import patterns as p
from traceq.ingest.serverlog.lines import extract_record
from traceq.ingest.serverlog.stats import quarantine_rows

MESSAGE_LIMIT = 1000  # characters of a message kept in `events.message`


@dataclass(frozen=True)
class Milestone:
    """A startup line: `start` (a regex) begins its message, `pattern` reads it; one event
    per (kind, group). The first group is required: a line that starts like a milestone but
    does not parse is quarantined.
    """

    name: str
    start: str
    pattern: str
    kinds: tuple[tuple[str, str], ...]


MILESTONES: tuple[Milestone, ...] = (
    Milestone(
        "weights_load",
        r"Loading weights took",
        r"Loading weights took (?P<s>[\d.]+) seconds",
        (("startup_weights_load_s", "s"),),
    ),
    Milestone(
        "model_load",
        r"Model loading took",
        r"Model loading took (?P<gib>-?[\d.]+) (?:GiB|GB)(?: memory)?"
        r"(?: and (?P<s>[\d.]+) seconds)?",
        (("startup_model_load_gib", "gib"), ("startup_model_load_s", "s")),
    ),
    Milestone(
        "model_weights_v0",
        r"Loading model weights took",
        r"Loading model weights took (?P<gib>[\d.]+) (?:GiB|GB)",
        (("startup_model_load_gib", "gib"),),
    ),
    Milestone(
        "kv_available",
        r"Available KV cache memory:",
        r"Available KV cache memory: (?P<gib>-?[\d.]+) GiB",
        (("startup_kv_available_gib", "gib"),),
    ),
    Milestone(
        "kv_tokens",
        r"\w+ KV cache size:",
        r"KV cache size: (?P<tok>[\d,]+) tokens",
        (("startup_kv_tokens", "tok"),),
    ),
    Milestone(
        "blocks_v0",
        r"# \w+ blocks:",
        r"# \w+ blocks: (?P<gpu>\d+), # CPU blocks: (?P<cpu>\d+)",
        (("startup_gpu_blocks", "gpu"), ("startup_cpu_blocks", "cpu")),
    ),
    Milestone(
        "blocks_v1",
        r"vllm cache_config_info",
        r"num_gpu_blocks is: (?P<n>\d+)",
        (("startup_gpu_blocks", "n"),),
    ),
    Milestone(
        "max_concurrency",
        r"Maximum concurrency for",
        r"Maximum concurrency for [\d,]+ tokens per request: (?P<x>[\d.]+)x",
        (("startup_max_concurrency", "x"),),
    ),
    Milestone(
        "torch_compile",
        r"torch\.compile takes",
        r"torch\.compile takes (?P<s>[\d.]+) s in total",
        (("startup_torch_compile_s", "s"),),
    ),
    Milestone(
        "cuda_graph_capture",
        r"Graph capturing finished in",
        r"Graph capturing finished in (?P<s>\d+(?:\.\d+)?) secs?(?:, took (?P<gib>-?[\d.]+) GiB)?",
        (("cuda_graph", "s"), ("cuda_graph_gib", "gib")),
    ),
    Milestone(
        "engine_init",
        r"init engine \(profile, create kv cache, warmup model\) took",
        r"took (?P<s>[\d.]+) (?:seconds|s)\b(?: \(compilation: (?P<c>[\d.]+) s\))?",
        (("startup_engine_init_s", "s"), ("startup_compilation_s", "c")),
    ),
    Milestone(
        "version",
        r"vLLM API server version",
        r"vLLM API server version (?P<ver>\S+)",
        (("startup_version", "ver"),),
    ),
    Milestone(
        "engine_config",
        r"Initializing an? (?:V\d )?LLM engine \(v",
        r"LLM engine \((?P<ver>v[^)\s]+)\)",
        (("startup_engine_config", "ver"),),
    ),
    Milestone(
        "server_start",
        r"Starting vLLM ",
        r"Starting vLLM (?:API )?server(?P<n> \d+)? on (?P<url>\S+)",
        (("startup_server_start", "url"),),
    ),
    Milestone(
        "spec_decode_v1",
        r"SpecDecoding metrics:",
        r"Mean acceptance length: (?P<x>[\d.]+)",
        (("spec_decode_acceptance_length", "x"),),
    ),
    Milestone(
        "spec_decode_v0",
        r"Speculative metrics:",
        r"Draft acceptance rate: (?P<x>[\d.]+)",
        (("spec_decode_acceptance_rate", "x"),),
    ),
)
MILESTONES = tuple(
    Milestone(m.name, p.ascii_classes(m.start), p.ascii_classes(m.pattern), m.kinds)
    for m in MILESTONES
)
# Text kinds of failures and shutdown, wherever they appear (prefixed or raw process output).
FAILURES: tuple[tuple[str, str], ...] = (
    ("oom", r"CUDA out of memory|OutOfMemoryError"),
    ("engine_dead", r"EngineDeadError"),
    ("engine_start_failed", r"EngineCore failed to start|Engine core initialization failed"),
    (
        "kv_cache_insufficient",
        r"No available memory for the cache blocks|KV cache is needed, which is larger than "
        r"the available KV cache memory|larger than the maximum number of tokens that can be "
        r"stored in KV cache",
    ),
    ("shutdown", r"signal=SIG(?:TERM|INT)|Shutting down"),
)


def _event(
    df: pl.DataFrame, kind: pl.Expr | str, value: pl.Expr | None = None, **extra
) -> pl.DataFrame:
    severity = pl.col("level").fill_null(pl.lit("INFO"))
    return df.select(
        "ts",
        "instance",
        kind=kind if isinstance(kind, pl.Expr) else pl.lit(kind),
        severity=severity,
        value=value if value is not None else pl.lit(None, pl.Float64),
        message=pl.coalesce("text_", "msg").str.slice(0, MESSAGE_LIMIT),
        line="line_no",
        process="process",
        **extra,
    )


def extract(records: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Categorised records → `events`, `lifecycle` (scratch) and `quarantine` frames."""
    out: dict[str, list[pl.DataFrame]] = {
        "events": [],
        "lifecycle": [],
        "model": [],
        "quarantine": [],
    }
    by_cat = records.partition_by("cat", as_dict=True)
    get = lambda name: by_cat.get((name,), records.clear())  # noqa: E731
    for m in MILESTONES:
        df = get(m.name)
        if df.height == 0:
            continue
        first = m.kinds[0][1]
        df = extract_record(df, m.pattern, first)
        out["quarantine"].append(
            quarantine_rows(
                df.filter(pl.col(first).is_null()), f"unreadable startup line ({m.name})"
            )
        )
        df = df.filter(pl.col(first).is_not_null())
        for kind, group in m.kinds:
            rows = df.filter(pl.col(group).is_not_null())
            number = pl.col(group).str.replace_all(",", "").cast(pl.Float64, strict=False)
            out["events"].append(_event(rows, kind, number))
    _model(get("engine_config"), out)
    _preemptions(get("preemption"), out)
    _requests(get("received"), get("lifecycle"), out)
    http = (
        get("http")
        .with_columns(pl.col("clean").str.extract_groups(p.UVICORN_ACCESS).alias("_g"))
        .unnest("_g")
    )
    http = http.with_columns(
        text_=pl.format("{} {} {}", "method", "path", "status"), level=pl.lit("INFO")
    )
    out["events"].append(_event(http, "http", pl.col("status").cast(pl.Float64)))
    for name in ("startup_ready", "error", "warning", "shutdown"):
        out["events"].append(_event(get(name), name))
    for name, _ in FAILURES:
        if name != "shutdown":  # a failure printed raw (no level) is still an error
            failed = get(name).with_columns(level=pl.col("level").fill_null("ERROR"))
            out["events"].append(_event(failed, name))
    exc = get("exception").with_columns(level=pl.lit("ERROR"))
    out["events"].append(_event(exc, "error"))
    out["quarantine"] += [
        quarantine_rows(get("long"), "line longer than 1 MiB (not parsed)"),
        quarantine_rows(get("stats_fragment"), "stats fragment without a log prefix"),
    ]
    return {
        k: pl.concat([f for f in v if f.height], how="diagonal_relaxed")
        if any(f.height for f in v)
        else pl.DataFrame()
        for k, v in out.items()
    }


def _model(df: pl.DataFrame, out: dict[str, list[pl.DataFrame]]) -> None:
    """The model an engine serves, from its config line: the served name clients use, else
    the model path. Kept for the requests pass (requests.model)."""
    if df.height == 0:
        return
    served = pl.col("msg").str.extract(p.SERVED_MODEL, 1)
    model = pl.coalesce(
        pl.when(served != "None").then(served), pl.col("msg").str.extract(p.MODEL, 1)
    )
    out["model"].append(df.select("ts", model=model).drop_nulls("model"))


def _preemptions(df: pl.DataFrame, out: dict[str, list[pl.DataFrame]]) -> None:
    if df.height == 0:
        return
    df = extract_record(df, p.PREEMPT, "n")
    out["quarantine"].append(
        quarantine_rows(df.filter(pl.col("n").is_null()), "preemption warning does not parse")
    )
    ok = df.filter(pl.col("n").is_not_null()).with_columns(
        text_=pl.format("mode={}; cumulative preemptions (V0 logs every 50th)", "mode")
    )
    out["events"].append(
        _event(ok, "preemption", pl.col("n").cast(pl.Float64), request_id=pl.col("req"))
    )


def _requests(
    received: pl.DataFrame, lifecycle: pl.DataFrame, out: dict[str, list[pl.DataFrame]]
) -> None:
    """Lifecycle events; the prompt text is never kept (message is null)."""
    msg = pl.col("msg")
    rec = extract_record(received, p.RECEIVED, "req").with_columns(
        what=pl.lit("received"),
        ids=msg.str.extract(p.PROMPT_IDS, 1),
        n=msg.str.extract(p.NUM_PROMPT_TOKENS, 1).cast(pl.Int64),
        max_tokens=msg.str.extract(p.MAX_TOKENS, 1).cast(pl.Int64),
    )
    rec = rec.with_columns(
        prompt_tokens=pl.coalesce(
            pl.when(pl.col("ids").str.strip_chars() != "").then(
                pl.col("ids").str.count_matches(",", literal=True).cast(pl.Int64) + 1
            ),
            pl.when(pl.col("ids").is_not_null()).then(pl.lit(0, pl.Int64)),
            "n",
        )
    )
    lc = extract_record(lifecycle, p.LIFECYCLE, "req").with_columns(
        req=pl.col("req").str.strip_suffix("."),
        what=pl.col("what").str.to_lowercase(),
        prompt_tokens=pl.lit(None, pl.Int64),
        max_tokens=pl.lit(None, pl.Int64),
    )
    both = pl.concat([rec, lc], how="diagonal_relaxed")
    if both.height == 0:
        return
    out["quarantine"].append(
        quarantine_rows(both.filter(pl.col("req").is_null()), "request line does not parse")
    )
    # No message at all: the prompt text must never reach the dataset.
    both = both.filter(pl.col("req").is_not_null()).with_columns(
        text_=pl.lit(None, pl.String), msg=pl.lit(None, pl.String)
    )
    out["events"].append(
        _event(
            both,
            pl.concat_str(pl.lit("request_"), "what"),
            pl.col("prompt_tokens").cast(pl.Float64),
            request_id=pl.col("req"),
        )
    )
    out["lifecycle"].append(
        both.select("ts", "instance", "what", "prompt_tokens", "max_tokens", request_id="req")
    )
