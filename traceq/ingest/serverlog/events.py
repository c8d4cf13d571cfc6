"""Log records → `events`: startup milestones, preemptions, request lifecycle, HTTP access,
warnings, errors, OOM and engine death.

`categorise` gives every record exactly one category (cheap literal tests, in priority order);
`extract` turns each category into event rows, lifecycle rows (for the coarse `requests`
rows) or quarantine rows. What remains is counted by category in the manifest.
"""

from __future__ import annotations

import re
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
_RAW_TEXT = pl.col("clean").str.replace(r"^(?:\([^()]*\) )+", "")


# What a vLLM message starts with decides its category (one anchored pass over all records).
_STARTS: tuple[tuple[str, str], ...] = (
    ("stats", r"Avg prompt throughput:|Throughput: [\d.]+ tokens/s"),
    ("received", r"Received request "),
    ("lifecycle", r"(?:Added|Finished|Aborted) request "),
    ("preemption", r"Sequence group \S+ is preempted by"),
    *((m.name, m.start) for m in MILESTONES),
)
# One anchored pass finds which start a message has (group 1: the start's own text).
_START = p.ascii_classes(
    "^(?:Engine \\d+: )?(" + "|".join(f"(?:{frag})" for _, frag in _STARTS) + ")"
)
_START_RE = tuple((name, re.compile(frag)) for name, frag in _STARTS)
# The commonest starts, decided by literal tests first (the same answer `_START` gives, at a
# fraction of the cost of a capture over every message); `_START` runs on the rest only.
_QUICK_STARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("received", ("Received request ",)),
    ("lifecycle", ("Added request ", "Finished request ", "Aborted request ")),
    ("stats", ("Avg prompt throughput:",)),
)
_QUICK_ENGINE_STATS = r"^Engine [0-9]+: Avg prompt throughput:"
# Rarer text found anywhere in a message: failures and shutdown (one pass, few matches).
_ANYWHERE = "|".join(pattern for _, pattern in FAILURES)


_OWN_CATEGORY = ("http", "long", "binary", "third_party")


def categorise(records: pl.DataFrame) -> pl.DataFrame:
    """Add `cat`: the one thing each record is. The bulk (vLLM lines) is decided by how the
    message starts; only what remains goes through the slower tests."""
    # `text_`: the message of an event when it is not `msg` (set for the residual records).
    records = records.with_columns(text_=pl.lit(None, pl.String), cat=pl.lit(None, pl.String))
    vllm = records["kind"] == "vllm"
    if vllm.any():
        cats = _start_cats(records.filter(vllm)["msg"])
        records = records.with_columns(records["cat"].scatter(vllm.arg_true(), cats))
    # Kinds that are their own category skip the residual tests.
    own = pl.col("kind").is_in(_OWN_CATEGORY)
    records = records.with_columns(cat=pl.when(own).then("kind").otherwise("cat"))
    rest = records["cat"].is_null()
    if rest.any():
        sub = records.filter(rest)
        sub = sub.with_columns(
            text_=pl.when(pl.col("kind").is_in(("vllm", "sglang")))
            .then(pl.col("msg"))
            .otherwise(_RAW_TEXT)
        )
        sub = sub.with_columns(_residual_cat())
        records = records.with_columns(
            records["cat"].scatter(rest.arg_true(), sub["cat"]),
            records["text_"].scatter(rest.arg_true(), sub["text_"]),
        )
    return records


def _start_cats(msg: pl.Series) -> pl.Series:
    """The category each message's start gives (null: none of `_STARTS`)."""
    m = pl.col("msg")
    quick = pl.when(m.str.starts_with("Engine ") & m.str.contains(_QUICK_ENGINE_STATS))
    quick = quick.then(pl.lit("stats"))
    for name, starts in _QUICK_STARTS:
        hit = pl.any_horizontal(m.str.starts_with(start) for start in starts)
        quick = quick.when(hit).then(pl.lit(name))
    cats = msg.to_frame("msg").select(quick.otherwise(None)).to_series()
    rest = cats.is_null()
    if not rest.any():
        return cats
    hits = msg.filter(rest).str.extract(_START, 1)
    # Few distinct starts: name each once in Python, then map them all at once.
    names = {hit: _start_name(hit) for hit in hits.drop_nulls().unique().to_list()}
    named = hits.replace_strict(names, default=None, return_dtype=pl.String)
    return cats.scatter(rest.arg_true(), named)


def _start_name(hit: str) -> str | None:
    return next((name for name, rx in _START_RE if rx.match(hit)), None)


def _residual_cat() -> pl.Expr:
    """Category of records no message start decided (errors, warnings, other output)."""
    kind, msg, text = pl.col("kind"), pl.col("msg"), pl.col("text_")
    vllm = kind == "vllm"
    level = pl.col("level")
    cat = pl.when(kind.is_in(("http", "long", "binary"))).then(kind)
    cat = cat.when((kind == "sglang") & msg.str.contains(r"^(?:Prefill|Decode) batch")).then(
        pl.lit("stats")
    )
    cat = cat.when(vllm & level.is_in(("ERROR", "CRITICAL")) & msg.str.contains(p.TRACEBACK_BODY))
    cat = cat.then(pl.lit("traceback"))
    raw = kind.is_in(("process_output", "other", "exception"))
    might_fail = (vllm | raw) & text.str.contains(_ANYWHERE)
    for name, pattern in FAILURES:
        cat = cat.when(might_fail & text.str.contains(pattern)).then(pl.lit(name))
    cat = cat.when(kind == "uvicorn").then(
        pl.when(text.str.contains("Application startup complete", literal=True))
        .then(pl.lit("startup_ready"))
        .otherwise(pl.lit("uvicorn"))
    )
    cat = cat.when(vllm & level.is_in(("ERROR", "CRITICAL"))).then(pl.lit("error"))
    cat = cat.when(vllm & (level == "WARNING")).then(pl.lit("warning"))
    cat = cat.when(raw & text.str.contains(p.EXCEPTION_LINE))
    cat = cat.then(pl.lit("exception"))
    cat = cat.when((kind == "other") & text.str.contains(p.STATS_FRAGMENT)).then(
        pl.lit("stats_fragment")
    )
    cat = cat.when(vllm).then(pl.concat_str(pl.lit("vllm_"), level.str.to_lowercase()))
    return cat.otherwise(kind).alias("cat")


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
                pl.col("ids").str.count_matches(",").cast(pl.Int64) + 1
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
