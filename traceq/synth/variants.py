"""Scenario strength and windowed variants.

`KNOBS` is the one table of fault strength: scenario × intensity (mild / medium / strong) →
knob values, each knob with its unit and the reason for its values. `strong` is the scenario
as committed in sample_traces/ (applying it changes nothing). `mild` is the smallest fault a
user should care about: its key figure lies modestly past the floor that the expected
playbook documents for "worth a finding" (about 1.2–1.6× the floor, e.g. 0.3–0.4 s stalls
against tbt-jitter's 250 ms), so a mild fault is a real but small incident, never one under
the line; where strong itself is barely past the floor (gpu-throttle) mild stays between
the floor and strong. `medium` lies between mild and strong. docs/SYNTH.md, Intensity, has
the table and the measured figures.

The knobs are set on the default hardware profile (8B on an H100). On a slower one a knob
relative to the GPU's speed scales with it (hardware.SPEED_RELATIVE), and a windowed fault is
fitted to the run's own traffic, which a profile thins (fit.py: the window holds
fit.WINDOW_MIN_FAULTY), so a mild fault is past its floor there too.

`with_window` confines a scenario's faults to a slice of an otherwise healthy run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from traceq.synth.config import Scenario
from traceq.synth.fit import full_lines
from traceq.synth.fit import markdown as window_minimums
from traceq.synth.hardware import DEFAULT as DEFAULT_HARDWARE
from traceq.synth.hardware import SPEED_RELATIVE
from traceq.synth.sim import simulate

INTENSITIES = ("mild", "medium", "strong")
DEFAULT_INTENSITY = "strong"
KV_STEP = 0.9  # × a KvPeak budget per step while the cache is not yet full


@dataclass(frozen=True)
class KvPeak:
    """A KV budget as a fraction of the peak KV tokens the same traffic needs with an
    unbounded cache (one extra simulation of the run, ~0.1 s for 200 requests, and one more
    per KV_STEP when `full_lines` asks for it)."""

    fraction: float
    floor: int = 0  # never below this (the strong budget: mild never outdoes strong)
    # lowered 0.9× a step (not below `floor`) until the cache is full in this many of the
    # run's stats lines (0: as the fraction gives; traceq/synth/fit.py counts them)
    full_lines: int = 0

    def __str__(self) -> str:
        text = (
            f"max({self.floor}, {self.fraction:g}× peak)"
            if self.floor
            else f"{self.fraction:g}× peak"
        )
        return text + (f", full in {self.full_lines} stats lines" if self.full_lines else "")


@dataclass(frozen=True)
class Knob:
    """One fault knob: `path` is `section.field` of the Scenario (engine / workload / faults)."""

    path: str
    unit: str
    reason: str
    mild: object
    medium: object
    strong: object

    def value(self, intensity: str) -> object:
        return getattr(self, intensity)


KNOBS: dict[str, tuple[Knob, ...]] = {
    "long-output-tail": (
        Knob("faults.long_output_fraction", "share of requests",
             "enough long requests that a 200-request run holds several at every seed",
             0.06, 0.05, 0.04),
        Knob("faults.long_output_tokens", "tokens (min, max)",
             "long-request-tail fires at 4× the run's median time in service (~0.75 s, a 128-"
             "token answer): 600–800 tokens take 5–6.5× (1.2–1.6× the floor); 2–3.5 k ≈ 20×",
             (600, 800), (1000, 2000), (2000, 3500)),
    ),
    "client-jitter": (
        Knob("faults.client_stall_prob", "per chunk",
             "a stall holds back the chunks queued behind it, so small rates already show",
             0.005, 0.012, 0.03),
        Knob("faults.client_stall_s", "s (min, max)",
             "tbt-jitter's stall floor is 250 ms: mild stalls of 0.3–0.4 s are 1.2–1.6× it "
             "(at 0.5 % of chunks, 2–5 stalls per 1,000 gaps against a floor of 2)",
             (0.3, 0.4), (0.3, 0.5), (0.15, 0.6)),
    ),
    "prefill-interference": (
        Knob("faults.long_prompt_fraction", "share of requests",
             "how often a whole prefill blocks the running decodes",
             0.04, 0.08, 0.12),
        Knob("faults.long_prompt_tokens", "tokens (min, max)",
             "a whole prefill of 9–12 k tokens stalls decodes 0.33–0.45 s, 1.3–1.8× the "
             "250 ms stall floor (an 8 k one ~0.28 s, a 16 k one ~0.66 s)",
             (9000, 12000), (9000, 14000), (8000, 16000)),
    ),
    "kv-pressure": (
        Knob("engine.kv_budget_tokens", "tokens; mild / medium × the same traffic's peak need",
             "recompute makes pressure a cliff, so a fixed size is no fault at one seed and a "
             "storm at the next; at 0.75 × the run's own peak the cache sits at 100 % for "
             "tens of seconds (kv-pressure's floor is 95 %) at most seeds; 0.85–0.95 × fills "
             "it at some seeds only. Where the budget leaves it full in fewer than two stats "
             "lines (20 s; mild 0.75 × at seeds 15 and 19), it is lowered 0.9× a step",
             KvPeak(0.75, 5_000, 2), KvPeak(0.7, 5_000, 2), 5_000),
    ),
    "queue-overload": (
        Knob("faults.overload_factor", "× arrival rate in the window",
             "a queue is a cliff: ttft-queueing's floor is p99 TTFT 500 ms; at 12× the burst "
             "crosses it at every seed tried (0.56–6 s), at 5–10× at some seeds only",
             12.0, 13.5, 15.0),
    ),
    "slow-tokenizer": (
        Knob("faults.tokenizer_slowdown",
             "× tokenization cost on the H100; × its prefill time per token over the H100's "
             "on another profile (hardware.SPEED_RELATIVE)",
             "tokenization 2 ms and 5 % of TTFT when healthy; at 18× 25–30 ms a request and "
             "~45 % of TTFT, 1.25–1.5× tokenizer-overhead's floors (20 ms, 30 %); at 100× "
             "~165 ms and > 80 %. A slower GPU's prefill lengthens TTFT and not tokenization "
             "(18× is 12–15 % of an L4's TTFT), so the slowdown grows with it (L4 8.2×, A100 "
             "3.2×, 70B 2.4×) and tokenization keeps its share",
             18.0, 30.0, 100.0),
    ),
    "warm-up-skew": (
        Knob("engine.warmup_factor", "× step cost at startup",
             "decays linearly to 1 over warmup_s: mild's first minute is 1.56× slower on "
             "average and its first 10-s windows ~2× (warm-up-skew's floor: 1.5× a window)",
             2.0, 3.0, 5.0),
    ),
    "gpu-throttle": (
        Knob("faults.throttle_factor", "× step cost in the window",
             "slow-decode's floor is 1.8× the weights roofline (4.8 ms) and healthy TPOT is "
             "~1.17× it; strong (2.17×) is itself only 1.2× the floor, so mild (1.98×, 1.1× "
             "the floor) lies between the floor and strong",
             1.65, 1.72, 1.8),
        Knob("faults.throttle_clock_mhz", "MHz",
             "SM clock ≈ 1980 MHz / factor, on the H100's 15 MHz steps",
             1200, 1155, 1095),
    ),
    "fixed-length": (
        Knob("faults.fixed_length_spread", "± fraction of the fixed lengths",
             "a load generator's range ratio: length CV = spread / √3, 0.035 (mild, 1/1.4 of "
             "unrealistic-load's 0.05) to 0 (strong); real traffic ≈ 0.5–2",
             0.06, 0.03, 0.0),
    ),
    "errors": (
        Knob("faults.error_fraction", "share of requests",
             "rejected prompts (HTTP 400): 3 % is 1.5× error-rate's 2 % floor",
             0.03, 0.04, 0.05),
        Knob("faults.overload_factor", "× arrival rate in the window",
             "the overload that makes requests wait past the client timeout",
             4.0, 8.0, 20.0),
        Knob("faults.timeout_s", "s",
             "client timeout: a longer one aborts fewer of the queued requests",
             5.0, 3.0, 1.5),
    ),
    "low-prefix-reuse": (
        Knob("faults.cache_salt_fraction", "share of requests",
             "requests with a unique value ahead of the system prompt (a cache salt, a "
             "timestamp) miss the cache; ttft-prefill judges a window's median prefill, so "
             "under half salted the median request still hits: 0.65 puts the median on a "
             "salted one in most windows (strong: caching off)",
             0.65, 0.85, 0.0),
        Knob("engine.prefix_caching", "on / off",
             "strong turns prefix caching off: every prompt is prefilled in full",
             True, True, False),
    ),
}  # fmt: skip


def with_intensity(sc: Scenario, intensity: str) -> Scenario:
    """`sc` with the knobs of `intensity` (`strong` leaves a named scenario as it is)."""
    if intensity not in INTENSITIES:
        msg = f"unknown intensity {intensity!r}; one of {', '.join(INTENSITIES)}"
        raise ValueError(msg)
    if sc.name not in KNOBS:
        msg = f"scenario {sc.name!r} injects no fault, so it has no intensity"
        raise ValueError(msg)
    return _set(sc, {k.path: k.value(intensity) for k in KNOBS[sc.name]})


def _get(sc: Scenario, path: str) -> float:
    section, name = path.split(".")
    return float(getattr(getattr(sc, section), name))


def _set(sc: Scenario, values: dict[str, object]) -> Scenario:
    parts: dict[str, dict[str, object]] = {}
    for path, v in values.items():
        section, name = path.split(".")
        parts.setdefault(section, {})[name] = v
    return replace(sc, **{s: replace(getattr(sc, s), **kw) for s, kw in parts.items()})


# Windowed variants whose whole-run knobs cannot be confined to a window. A KV cache or the
# prefix-caching switch is fixed for the life of the server, so inside the window the fault
# comes from the traffic: a burst of arrivals against a cache sized to the traffic outside it,
# or requests whose unique cache salt misses every shared prefix.
WINDOWED_KNOBS: dict[str, tuple[Knob, ...]] = {
    "long-output-tail": (
        Knob("faults.long_output_fraction", "share of requests in the window",
             "the minute holds ~50 requests: at the whole run's shares the quota puts one or "
             "two long requests in it, one at strong (4 %), and one request is one user's long "
             "answer, not a tail (long-request-tail's min_tail is 2); 6 % puts about three in "
             "it at every intensity, the 'several' of the whole-run knob; a window left with "
             "fewer (a slower profile's thinner traffic, or fewer arrivals than expected) gets "
             "three, at most a quarter of its requests (fit.WINDOW_MIN_FAULTY)",
             0.06, 0.06, 0.06),
    ),
    "kv-pressure": (
        Knob("engine.kv_budget_tokens", "× the peak need of the traffic without the burst",
             "headroom: no preemption before the window",
             KvPeak(1.5), KvPeak(1.5), KvPeak(1.5)),
        Knob("faults.overload_factor", "× arrival rate in the window, at least",
             "the burst that overflows the cache (3× still fits in 1.5× the peak); one that "
             "leaves the cache full in fewer than two stats lines is made 1.5× stronger until "
             "it does (fit.WINDOW_MIN_FAULTY): an L4's minute holds ~4 requests, and 4× of "
             "them fill its cache only from ~20×",
             4.0, 5.0, 8.0),
    ),
    "prefill-interference": (
        Knob("engine.chunked_prefill", "on / off",
             "off, the base traffic's own long prompts stall decodes outside the window too",
             True, True, True),
        Knob("engine.max_num_batched_tokens", "tokens per step",
             "raised for throughput (the whole-run variant has 32768): a 9–16 k prompt is one "
             "step of 0.3–0.65 s, past the 250 ms stall floor; at the default 8192 a chunk "
             "holds decodes ~0.23 s, the designed cost, under it",
             16384, 16384, 16384),
        Knob("faults.long_prompt_fraction", "share of requests in the window",
             "at 0.8 req/s about one stream runs at a time, so a long prefill stalls ~0.6 "
             "gaps: 18 % long prompts (~9 in the minute) give ~5 stalls, 1.5× "
             "prefill-interference's 3 within two minutes; a window left with fewer than four "
             "(a slower profile's minute holds 2–23 requests) gets more long prompts, then "
             "more arrivals (fit.WINDOW_MIN_FAULTY)",
             0.18, 0.24, 0.3),
        Knob("workload.rate_per_s", "requests / s",
             "the healthy rate: at 2 req/s mixed batches already stall decodes ~0.1 s",
             0.8, 0.8, 0.8),
    ),
    "low-prefix-reuse": (
        Knob("faults.cache_salt_fraction", "share of requests in the window",
             "requests with a unique cache salt miss the shared system prompt; over half, "
             "so that the window's median prefill is a salted request's",
             0.65, 0.85, 1.0),
        Knob("engine.prefix_caching", "on / off", "the server keeps caching on",
             True, True, True),
    ),
}  # fmt: skip


def with_window(sc: Scenario, window: tuple[float, float], intensity: str) -> Scenario:
    """`sc` with every fault confined to `window` (seconds after the first arrival); the
    traffic outside it is the scenario's healthy traffic. An overload window reads the extra
    requests it brings from the source (traceq/synth/arrivals.py), so the run after it keeps
    its length."""
    lo, hi = window
    if not 0 <= lo < hi:
        msg = f"window {lo:g}:{hi:g} must satisfy 0 <= START < END (seconds)"
        raise ValueError(msg)
    if sc.name not in KNOBS:
        msg = f"scenario {sc.name!r} injects no fault, so it has no window"
        raise ValueError(msg)
    sc = replace(sc, faults=replace(sc.faults, window_s=(float(lo), float(hi))))
    if sc.name == "warm-up-skew":
        if lo != 0:
            msg = "warm-up happens at startup: its window must start at 0 (e.g. 0:60)"
            raise ValueError(msg)
        sc = _set(sc, {"engine.warmup_s": sc.engine.startup_lead_s + hi})
    if sc.name in WINDOWED_KNOBS:
        sc = _set(sc, {k.path: k.value(intensity) for k in WINDOWED_KNOBS[sc.name]})
    return sc


def resolve(sc: Scenario, seed: int) -> Scenario:
    """Turn relative knobs (`KvPeak`) into numbers for this seed."""
    kv = sc.engine.kv_budget_tokens
    if not isinstance(kv, KvPeak):
        return sc
    free = replace(
        sc,
        engine=replace(sc.engine, kv_budget_tokens=400_000),
        faults=replace(sc.faults, overload_factor=1.0),
    )
    peak = simulate(free, seed, []).kv_max_tokens
    budget = max(1, kv.floor, int(kv.fraction * peak))
    out = replace(sc, engine=replace(sc.engine, kv_budget_tokens=budget))
    while kv.full_lines and budget > kv.floor and full_lines(out, seed) < kv.full_lines:
        budget = max(1, kv.floor, int(budget * KV_STEP))
        out = replace(sc, engine=replace(sc.engine, kv_budget_tokens=budget))
    return out


def describe(sc: Scenario, intensity: str | None) -> str:
    """The scenario's description, plus the intensity's knob values and the window."""
    text = sc.description
    if intensity and intensity != DEFAULT_INTENSITY:
        knobs = ", ".join(f"{k.path.split('.')[1]}={k.value(intensity)}" for k in KNOBS[sc.name])
        text += f" Intensity {intensity}: {knobs}."
    scaled = [p for k in KNOBS[sc.name] if (p := k.path) in SPEED_RELATIVE]
    if scaled and sc.hardware != DEFAULT_HARDWARE:
        values = ", ".join(f"{p.split('.')[1]}={_get(sc, p):g}" for p in scaled)
        text += f" On {sc.hardware}, scaled to its speed: {values}."
    if sc.faults.window_s:
        lo, hi = sc.faults.window_s
        text += f" Fault confined to {lo:g}–{hi:g} s after the first arrival."
    return text


def markdown() -> str:
    """The knob tables as Markdown (docs/SYNTH.md embeds this; tests/test_synth_variants.py
    checks the doc is current)."""
    lines = [
        "| scenario | knob | unit | mild | medium | strong | why |",
        "|---|---|---|---|---|---|---|",
    ]
    for table, suffix in ((KNOBS, ""), (WINDOWED_KNOBS, " (windowed)")):
        for name, knobs in table.items():
            for k in knobs:
                vals = " | ".join(_cell(k.value(i)) for i in INTENSITIES)
                lines.append(f"| `{name}`{suffix} | `{k.path}` | {k.unit} | {vals} | {k.reason} |")
    return "\n".join(lines) + "\n\n" + window_minimums()


def _cell(v: object) -> str:
    if isinstance(v, tuple):
        return "–".join(f"{x:g}" for x in v)
    return str(v) if not isinstance(v, float) else f"{v:g}"
