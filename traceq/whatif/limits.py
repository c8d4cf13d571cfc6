"""The engine's limits for a what-if replay: read from the start-up lines of the server log,
else vLLM's default for the version and GPU the log names, else from `--set`; each with the
place it came from and whether the run reached it.

>>> s = parse_settings(("max_num_seqs=96", "chunked_prefill=on"))
>>> s
{'max_num_seqs': 96, 'chunked_prefill': True}
>>> parse_settings(("max_num_seqs=0",))
Traceback (most recent call last):
...
traceq.whatif.limits.SettingError: --set max_num_seqs=0: out of range (1 to 65,536 ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from traceq.hardware.vllm_defaults import BIG_DEFAULTS, SMALL_DEFAULTS, big_gpu
from traceq.whatif.startup import engine_version, printed, same_line

SettingValue = int | bool


class SettingError(ValueError):
    """A `--set` the replay cannot take: unknown key, bad value, or a combination vLLM refuses."""


@dataclass(frozen=True)
class Knob:
    """A setting `--set` may change: its type, range and meaning."""

    name: str
    kind: type
    lo: int
    hi: int
    unit: str
    doc: str


KNOBS: dict[str, Knob] = {
    k.name: k
    for k in (
        Knob("max_num_seqs", int, 1, 65_536, "requests", "requests the scheduler runs at once"),
        Knob(
            "max_num_batched_tokens",
            int,
            16,
            2_097_152,
            "tokens",
            "tokens one engine step may schedule (decodes and prefill chunks)",
        ),
        Knob("chunked_prefill", bool, 0, 1, "on/off", "split long prompts over several steps"),
        Knob("prefix_caching", bool, 0, 1, "on/off", "serve shared prompt prefixes from cache"),
        Knob("kv_cache_tokens", int, 16, 100_000_000, "tokens", "GPU KV cache size"),
        Knob("replicas", int, 1, 4_096, "engines", "engine replicas the load is spread over"),
    )
}
CAPACITY = ("max_num_seqs", "max_num_batched_tokens", "kv_cache_tokens")
"""The limits a higher load can run into; the others are switches or the fleet size."""

KV_FULL = 0.99
"""KV usage (engine_stats.kv_usage, ratio) at which the run counts as having reached the cache
size: vLLM prints it to 0.1 %, and a full cache preempts before it shows 100 %."""

DEFAULTS_SINCE = (0, 9)
"""The first vLLM version whose V1 defaults are encoded here; older versions' limits must be
printed in the log or given with `--set`."""

UNCHUNKED_MIN_TOKENS = 2048
"""With chunked prefill off, vLLM's step budget defaults to max(max_model_len, this)."""

_ON = {"on", "true", "1", "yes"}
_OFF = {"off", "false", "0", "no"}


@dataclass(frozen=True)
class Limit:
    """One limit: its value, where it came from (`log`, `default`, `set`, `dataset`), the
    line or rule behind it, and whether the run reached it (None: not a capacity, or not
    known)."""

    name: str
    value: SettingValue
    source: str
    detail: str
    reached: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "source": self.source,
            "detail": self.detail,
            "reached": self.reached,
        }


@dataclass(frozen=True)
class Limits:
    """The engine's limits as the replay runs them, with the version and GPU behind the
    defaults."""

    items: dict[str, Limit]
    version: str | None
    max_model_len: int | None
    big_gpu: bool | None
    tensor_parallel: int
    gpus: Limit = field(
        default_factory=lambda: Limit("gpus_per_replica", 1, "assumed", "1 GPU per replica")
    )
    """GPUs one replica (one calibrated instance) spans: tensor × pipeline parallel size."""

    def value(self, name: str) -> Any:
        return self.items[name].value

    def settings(self) -> dict[str, SettingValue]:
        """Every knob's value, in KNOBS order (a scenario's `settings` in the JSON)."""
        return {name: self.items[name].value for name in KNOBS}

    def with_settings(self, settings: dict[str, SettingValue]) -> Limits:
        """These limits with `--set` applied. A step budget that was vLLM's default follows
        a change of chunked prefill, as vLLM would set it."""
        items = dict(self.items)
        for name, value in settings.items():
            items[name] = Limit(name, value, "set", f"--set {name}={_spoken(value)}")
        budget = items["max_num_batched_tokens"]
        if "chunked_prefill" in settings and budget.source == "default":
            default = _default_budget(self, bool(settings["chunked_prefill"]))
            if default is not None:
                items["max_num_batched_tokens"] = replace(
                    budget, value=default[0], detail=default[1]
                )
        out = replace(self, items=items)
        out.check()
        return out

    def check(self) -> None:
        """Combinations vLLM refuses at start-up."""
        budget = int(self.value("max_num_batched_tokens"))
        if not self.value("chunked_prefill") and self.max_model_len and budget < self.max_model_len:
            msg = (
                f"max_num_batched_tokens {budget:,} is below max_model_len "
                f"{self.max_model_len:,} with chunked prefill off: vLLM refuses that "
                "(turn chunked_prefill on or raise max_num_batched_tokens)"
            )
            raise SettingError(msg)

    def warnings(self) -> list[str]:
        """Defaults the run never reached: a replay that runs into one assumes it."""
        out = []
        for name in CAPACITY:
            lim = self.items[name]
            if lim.source == "default" and lim.reached is False:
                out.append(
                    f"{name} {_spoken(lim.value)} is {lim.detail}, not printed in the log, and "
                    "the run never reached it: predictions where it binds assume it"
                )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {name: lim.to_dict() for name, lim in self.items.items()}


def parse_settings(pairs: tuple[str, ...] | list[str]) -> dict[str, SettingValue]:
    """`--set K=V` pairs → {knob: value}; an unknown key or a value out of range raises
    SettingError naming the known keys or the range."""
    out: dict[str, SettingValue] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key, text = key.strip(), text.strip()
        if not sep or not key or not text:
            raise SettingError(f"--set expects KEY=VALUE, got {pair!r}; {_known()}")
        knob = KNOBS.get(key)
        if knob is None:
            raise SettingError(f"--set {key}: unknown setting; {_known()}")
        out[key] = _value(knob, text, pair)
    return out


def _known() -> str:
    return "known: " + ", ".join(
        f"{k.name} ({'on/off' if k.kind is bool else f'{k.lo:,} to {k.hi:,} {k.unit}'})"
        for k in KNOBS.values()
    )


def _value(knob: Knob, text: str, pair: str) -> SettingValue:
    if knob.kind is bool:
        if text.lower() in _ON:
            return True
        if text.lower() in _OFF:
            return False
        raise SettingError(f"--set {pair}: expects on or off; {_known()}")
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise SettingError(f"--set {pair}: not a whole number; {_known()}") from None
    if not knob.lo <= value <= knob.hi:
        raise SettingError(
            f"--set {pair}: out of range ({knob.lo:,} to {knob.hi:,} {knob.unit}); {_known()}"
        )
    return value


def _spoken(value: SettingValue) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:,}"


# -- reading the dataset ------------------------------------------------------------------


@dataclass(frozen=True)
class Peaks:
    """What the run reached: from its stats lines (null without them) and its rebuilt steps."""

    max_running: int | None
    max_kv_usage: float | None
    max_decode: int | None
    max_step_tokens: float | None
    max_uncached_prompt: int | None
    instances: int
    gpu_mib: float | None
    gpu_name: str | None
    gpus: int | None = None
    """GPUs in the GPU samples (null without them)."""


def read_limits(rows: pl.DataFrame, peaks: Peaks, settings: dict[str, SettingValue]) -> Limits:
    """The run's own limits: from the start-up rows (traceq/sql/whatif_settings.sql), else
    the defaults of the version and GPU, else `settings` (a `--set` of a limit the log does
    not print stands for the run's value too). Raises SettingError naming what is missing
    when a limit has no source at all."""
    found = printed(rows)
    version = engine_version(rows)
    big = None
    if peaks.gpu_mib is not None:
        big = big_gpu(peaks.gpu_mib / 1024, peaks.gpu_name)
    mml = found.get("max_model_len")
    tp = found.get("tensor_parallel_size")
    base = Limits(
        {},
        version,
        int(mml[0]) if mml else None,
        big,
        int(tp[0]) if tp else 1,
        _gpus_per_replica(found, peaks),
    )
    items: dict[str, Limit] = {}
    v1 = _at_least(version, DEFAULTS_SINCE)
    for name in ("chunked_prefill", "prefix_caching"):
        if name in found:
            items[name] = Limit(name, bool(found[name][0]), "log", found[name][1])
        elif v1:
            items[name] = Limit(name, True, "default", f"the default of vLLM {version}")
    if "kv_cache_tokens" in found:
        items["kv_cache_tokens"] = Limit(
            "kv_cache_tokens", int(found["kv_cache_tokens"][0]), "log", found["kv_cache_tokens"][1]
        )
    for name in ("max_num_seqs", "max_num_batched_tokens"):
        if name in found:
            items[name] = Limit(name, int(found[name][0]), "log", found[name][1])
    if "max_num_seqs" not in items and v1 and big is not None:
        table = BIG_DEFAULTS if big else SMALL_DEFAULTS
        items["max_num_seqs"] = Limit(
            "max_num_seqs", table["max_num_seqs"], "default", _default_words(version, big)
        )
    if "max_num_batched_tokens" not in items and "chunked_prefill" in items and v1:
        default = _default_budget(base, bool(items["chunked_prefill"].value))
        if default is not None:
            items["max_num_batched_tokens"] = Limit(
                "max_num_batched_tokens", default[0], "default", default[1]
            )
    n = max(1, peaks.instances)
    words = "1 instance" if n == 1 else f"{n:,} instances"
    items["replicas"] = Limit("replicas", n, "dataset", f"{words} serving the run")
    for name, value in settings.items():  # the run's own value where nothing else says it
        if name not in items:
            items[name] = Limit(
                name, value, "set", f"--set {name}={_spoken(value)} (not in the log)"
            )
    missing = [name for name in KNOBS if name not in items]
    if missing:
        msg = (
            "engine limits missing: "
            + ", ".join(missing)
            + " (no start-up line prints them"
            + ("" if version else ", and no vLLM version to take defaults from")
            + "); ingest the server log from the engine's start, or give each with --set "
            + " ".join(f"{m}=…" for m in missing)
        )
        raise SettingError(msg)
    items = {name: _reached(items[name], peaks) for name in KNOBS}
    limits = replace(base, items=items)
    limits.check()
    return limits


def _gpus_per_replica(found: dict[str, tuple[float, str]], peaks: Peaks) -> Limit:
    """GPUs one replica spans: tensor × pipeline parallel size from the start-up lines, else
    the GPUs in the GPU samples shared evenly by the instances, else 1 (assumed, and said)."""
    name = "gpus_per_replica"
    tp, pp = found.get("tensor_parallel_size"), found.get("pipeline_parallel_size")
    if tp or pp:
        value = int((tp or (1.0, ""))[0]) * int((pp or (1.0, ""))[0])
        return Limit(name, max(1, value), "log", same_line([x[1] for x in (tp, pp) if x]))
    n = max(1, peaks.instances)
    if peaks.gpus and peaks.gpus >= n and peaks.gpus % n == 0:
        words = "1 instance" if n == 1 else f"{n:,} instances"
        return Limit(name, peaks.gpus // n, "dataset", f"{peaks.gpus:,} GPUs sampled, {words}")
    return Limit(name, 1, "assumed", "no tensor_parallel_size line nor GPU samples: 1 assumed")


def _at_least(version: str | None, since: tuple[int, int]) -> bool:
    if not version:
        return False
    parts = re.findall(r"\d+", version)[:2]
    return len(parts) == 2 and (int(parts[0]), int(parts[1])) >= since


def _default_words(version: str | None, big: bool) -> str:
    gpu = "a GPU of ≥ 70 GiB (not an A100)" if big else "a GPU under 70 GiB or an A100"
    return f"the default of vLLM {version} on {gpu}"


def _default_budget(limits: Limits, chunked: bool) -> tuple[int, str] | None:
    """vLLM's step budget when none is set: the GPU's default with chunked prefill, else
    max(max_model_len, 2048)."""
    if chunked:
        if limits.big_gpu is None:
            return None
        table = BIG_DEFAULTS if limits.big_gpu else SMALL_DEFAULTS
        words = _default_words(limits.version, limits.big_gpu) + " with chunked prefill on"
        return table["max_num_batched_tokens"], words
    if limits.max_model_len is None:
        return None
    value = max(limits.max_model_len, UNCHUNKED_MIN_TOKENS)
    return value, (
        f"the default of vLLM {limits.version} with chunked prefill off: "
        f"max(max_model_len {limits.max_model_len:,}, {UNCHUNKED_MIN_TOKENS:,})"
    )


def _reached(lim: Limit, peaks: Peaks) -> Limit:
    v = lim.value
    reached: bool | None = None
    if lim.name == "max_num_seqs":
        seen = [x for x in (peaks.max_running, peaks.max_decode) if x is not None]
        reached = max(seen) >= int(v) if seen else None
    elif lim.name == "kv_cache_tokens":
        reached = None if peaks.max_kv_usage is None else peaks.max_kv_usage >= KV_FULL
    elif lim.name == "max_num_batched_tokens":
        steps = peaks.max_step_tokens or 0
        prompt = peaks.max_uncached_prompt or 0
        reached = steps >= 0.95 * int(v) or prompt > int(v)
    return replace(lim, reached=reached)
