"""Log records → `events`: startup milestones and settings, preemptions, request lifecycle,
HTTP access, warnings, errors, OOM (with PyTorch's numbers), KV-connector load failures and
engine death.

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
    ("oom", p.OOM),
    ("engine_dead", r"EngineDeadError"),
    ("engine_start_failed", r"EngineCore failed to start|Engine core initialization failed"),
    (
        "kv_cache_insufficient",
        r"No available memory for the cache blocks|KV cache is needed, which is larger than "
        r"the available KV cache memory|larger than the maximum number of tokens that can be "
        r"stored in KV cache",
    ),
    # KV-connector loads that failed (patterns.py names the producers): vLLM's scheduler,
    # NIXL, LMCache's adapter. A shortfall in LMCache's `Retrieved` line is one too
    # (`KV_RETRIEVED`: decided by its numbers, in categories.py).
    (
        "kv_load_failed",
        r"due to KV load failure|" + p.NIXL_FAILED + r"|Num retrieved tokens: \d+, num expected",
    ),
    ("kv_load_rescheduled", r"Recovered from KV load failure: "),
    ("shutdown", r"signal=SIG(?:TERM|INT)|Shutting down"),
)
FAILURES = tuple((name, p.ascii_classes(pattern)) for name, pattern in FAILURES)
# LMCache's `Retrieved R out of N …` (every retrieve): searched anywhere like FAILURES;
# `kv_load_failed` when R < N, else `kv_retrieve` (counted only).
KV_RETRIEVED = p.LMCACHE_RETRIEVED


@dataclass(frozen=True)
class Setting:
    """A start-up setting: `kind` is its event, `keys` the names it is printed under (the first
    found counts), `number` whether its value is numeric (else text: value null, the message
    says `key=value`)."""

    kind: str
    keys: tuple[str, ...]
    number: bool


SETTINGS: tuple[Setting, ...] = (
    Setting("setting_gpu_memory_utilization", ("gpu_memory_utilization",), True),
    Setting("setting_max_model_len", ("max_model_len", "max_seq_len"), True),
    Setting("setting_max_num_seqs", ("max_num_seqs",), True),
    Setting("setting_max_num_batched_tokens", ("max_num_batched_tokens",), True),
    Setting("setting_tensor_parallel_size", ("tensor_parallel_size",), True),
    Setting("setting_pipeline_parallel_size", ("pipeline_parallel_size",), True),
    Setting("setting_model", ("model",), False),
    Setting("setting_dtype", ("dtype",), False),
    Setting("setting_quantization", ("quantization",), False),
    Setting("setting_kv_cache_dtype", ("kv_cache_dtype",), False),
    Setting(
        "setting_chunked_prefill", ("enable_chunked_prefill", "chunked_prefill_enabled"), False
    ),
)
_NUMBER = r"(?P<v>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
# Quoted (a dict or Namespace repr) or bare (the engine config line: `dtype=torch.bfloat16`).
_TEXT = r"""(?:'(?P<q>[^']*)'|"(?P<d>[^"]*)"|(?P<v>[^\s,'"(){}\[\]]+))"""


def setting_pattern(key: str, number: bool) -> str:
    """`key` as a dict key (`'key': value`) or keyword (`key=value`), a whole name (not the end
    of `kv_cache_dtype` for `dtype`, not `model_tag` for `model`); its value in `v` (`q` / `d`
    when quoted)."""
    return p.ascii_classes(
        r"(?:^|[^\w.'])'?" + key + r"'?(?::\s*|=)" + (_NUMBER if number else _TEXT)
    )


# Sizes as PyTorch prints them (`format_size`), in GiB.
_GIB = {"bytes": 1 / 2**30, "KiB": 1 / 2**20, "MiB": 1 / 2**10, "GiB": 1.0}


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
    _settings(pl.concat([get("settings"), get("engine_config")]), out)
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
    readers = {"oom": _oom, "kv_load_failed": _kv_load_failed}
    for name, _ in FAILURES:
        if name != "shutdown":  # a failure printed raw (no level) is still an error
            failed = get(name).with_columns(level=pl.col("level").fill_null("ERROR"))
            if name in readers:
                readers[name](failed, out)
            elif name == "kv_load_rescheduled":
                text = pl.coalesce("text_", "msg")
                reqs = text.str.extract(p.VLLM_KV_RESCHEDULED, 1).cast(pl.Float64)
                out["events"].append(_event(failed, name, reqs))
            else:
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


def _settings(df: pl.DataFrame, out: dict[str, list[pl.DataFrame]]) -> None:
    """One event per setting a start-up line prints (`SETTINGS`): numeric ones with their
    value, text ones with value null; the message is `key=value` as printed (unquoted)."""
    if df.height == 0:
        return
    # Top-level settings only: what nests (a draft model's own `model`, config objects, JSON)
    # is blanked out, innermost first.
    body = pl.col("msg").str.replace(p.SETTINGS_BODY, "")
    for _ in range(3):
        body = body.str.replace_all(p.SETTINGS_NESTED, "")
    df = df.with_columns(_body=body)
    for setting in SETTINGS:
        values, keys = [], []
        for key in setting.keys:
            g = pl.col("_body").str.extract_groups(setting_pattern(key, setting.number))
            fields = ("q", "d", "v") if not setting.number else ("v",)
            value = pl.coalesce(g.struct.field(f) for f in fields)
            values.append(value)
            keys.append(pl.when(value.is_not_null()).then(pl.lit(key)))
        rows = df.with_columns(_v=pl.coalesce(values), _k=pl.coalesce(keys))
        rows = rows.filter(pl.col("_v").is_not_null() & ~pl.col("_v").is_in(("", "None")))
        rows = rows.with_columns(text_=pl.format("{}={}", "_k", "_v"))
        number = pl.col("_v").cast(pl.Float64, strict=False) if setting.number else None
        out["events"].append(_event(rows, setting.kind, number))


def _gib(n: pl.Expr, unit: pl.Expr) -> pl.Expr:
    return n.cast(pl.Float64) * unit.replace_strict(_GIB, default=None, return_dtype=pl.Float64)


def _oom(df: pl.DataFrame, out: dict[str, list[pl.DataFrame]]) -> None:
    """`oom` (value: GiB it tried to allocate; the message from the OOM text on, so that the
    numbers are kept), `oom_total_gib`, `oom_free_gib` and one `oom_process_gib` per other
    process PyTorch names (the message: the clause printed); the details are INFO, so one
    OOM counts as one error."""
    if df.height == 0:
        return
    text = pl.coalesce("text_", "msg")
    df = df.with_columns(text_=pl.coalesce(text.str.extract(p.OOM_TEXT, 0), text))
    t = pl.col("text_")
    tried = t.str.extract_groups(p.OOM_TRIED)
    value = _gib(tried.struct.field("n"), tried.struct.field("unit"))
    out["events"].append(_event(df, "oom", value))
    df = df.with_columns(level=pl.lit("INFO"))  # the details of that one error, not errors
    for kind, pattern in (("oom_total_gib", p.OOM_TOTAL), ("oom_free_gib", p.OOM_FREE)):
        g = t.str.extract_groups(pattern)
        gib = pl.coalesce(
            _gib(g.struct.field("n"), g.struct.field("unit")),
            _gib(g.struct.field("n2"), g.struct.field("unit2")),
        )
        rows = df.with_columns(_v=gib, text_=t.str.extract(pattern, 0))
        out["events"].append(_event(rows.filter(pl.col("_v").is_not_null()), kind, pl.col("_v")))
    clauses = t.str.extract_all(p.OOM_PROCESS).list.unique(maintain_order=True)
    procs = df.with_columns(_c=clauses).explode("_c").filter(pl.col("_c").is_not_null())
    size = pl.col("_c").str.extract_groups(p.OOM_SIZE)
    procs = procs.with_columns(
        text_=pl.col("_c"), _v=_gib(size.struct.field("n"), size.struct.field("unit"))
    )
    out["events"].append(_event(procs, "oom_process_gib", pl.col("_v")))


def _kv_load_failed(df: pl.DataFrame, out: dict[str, list[pl.DataFrame]]) -> None:
    """`kv_load_failed`, value what did not load when the line says: tokens (vLLM's
    scheduler: tokens affected; LMCache: expected - retrieved) or blocks (NIXL:
    `num_local_blocks`); the request when the line names one."""
    if df.height == 0:
        return
    t = pl.coalesce("text_", "msg")
    vllm = t.str.extract_groups(p.VLLM_KV_FAILED).struct.field("tokens")
    short = t.str.extract_groups(p.LMCACHE_SHORT)
    retrieved = t.str.extract_groups(p.LMCACHE_RETRIEVED)
    nixl_req = t.str.extract_groups(p.NIXL_REQUEST)

    def missing(g: pl.Expr) -> pl.Expr:
        return g.struct.field("want").cast(pl.Float64) - g.struct.field("got").cast(pl.Float64)

    value = pl.coalesce(
        vllm.cast(pl.Float64),
        t.str.extract(p.NIXL_BLOCKS, 1).cast(pl.Float64),
        missing(short),
        missing(retrieved),
    )
    request = pl.coalesce(
        nixl_req.struct.field("req"),
        nixl_req.struct.field("req2").str.strip_suffix("."),
        retrieved.struct.field("req"),
    )
    out["events"].append(_event(df, "kv_load_failed", value, request_id=request))
