"""Windowed faults fitted to the run: a knob raised, on the run's own arrivals and simulation,
until the window holds what its fault needs to reach its key figure (variants.py: mild lies
modestly past the floor of the playbook that should find it).

A hardware profile scales the arrival rate with its capacity (hardware.py), so a minute on a
slower GPU holds fewer requests, chunks and prefills than on the H100 the knobs were set on
(an L4's minute about four requests): a share of the window's requests can leave it with one
long answer instead of a tail, one stalled decode instead of a pattern, a burst that never
fills the cache. `fit` counts what the window holds and raises a knob only where it falls
short (`WINDOW_MIN_FAULTY` says what each fault needs, why, and how it is raised), so a run
that reaches its figure is the run its knobs describe. Whole runs are not fitted: 200
requests hold every fault at every seed (docs/SYNTH.md, Python API); only a whole run's
KV budget relative to its own peak (variants.KvPeak) is lowered until the cache is full in
`full_lines` stats lines.
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from itertools import pairwise

from traceq.hardware.vllm_defaults import defaults
from traceq.synth.arrivals import Arrival, arrivals, rng
from traceq.synth.config import EngineConfig, Scenario
from traceq.synth.engine import NS, Request, StepInfo, window_ns
from traceq.synth.faults import ClientView
from traceq.synth.hardware import PROFILES
from traceq.synth.sim import simulate
from traceq.synth.write_vllm_log import STATS_INTERVAL_NS, STATS_OFFSET_NS

RATE_STEP = 1.25  # × arrival rate in the window per step, when the window holds too few
MAX_RATE = 16.0  # × arrival rate: beyond it the window's traffic is no longer the run's
BURST_STEP = 1.5  # × kv-pressure's burst per step
MAX_BURST = 64.0  # × arrival rate: a burst the cache still holds there is no KV fault
# What the playbooks count, on the reference engine (8B on an H100, 8,192-token budget)
STALL_S = 0.25  # prefill-interference's stall_ms and tbt-jitter's stall floors
STALL_K = 4.0  # tbt-jitter's stall_k: × the request's median gap
LONG_PREFILL_TOKENS = 4000  # prefill-interference's long_prefill_tokens
REFERENCE_BUDGET = 8192  # tokens per step the stall floor was set with
KV_FULL = 0.95  # kv-pressure's kv_full
TOP_UP_STALL_S = 1.2 * STALL_S  # an added client stall: mild's shortest, past the floor
TAIL_SHARE = 0.25  # the most of a window's requests a fitted long-output tail may be


@dataclass(frozen=True)
class Minimum:
    """The fewest faulty things a windowed fault's window must hold."""

    what: str
    count: int
    reason: str
    how: str  # how `fit` raises the fault until the window holds them


WINDOW_MIN_FAULTY: dict[str, Minimum] = {
    "long-output-tail": Minimum(
        "requests with a long output, at most a quarter of its requests", 3,
        "long-request-tail's min_tail is 2, and one long request is one user's long answer; "
        "three is the 'several' of the whole-run knob. A tail is a few requests among many: "
        "where half the window's are long, its median is a long one and no tail stands out",
        "the share of long outputs among the window's own arrivals that gives three; a window "
        "with fewer than twelve arrivals gets them faster (1.25× steps, as an overload)"),
    "prefill-interference": Minimum(
        "decode gaps of at least stall_ms (a budgeted step on the profile's GPU) with 4 k "
        "tokens of others' prompts prefilled inside", 4,
        "prefill-interference's min_stalls is 3 within ±60 s: four is 1.33× it; a long prompt "
        "stalls only the decodes running beside it, about one at chat rates",
        "long prompts for more of the window's own arrivals (1.25× steps); then arrivals "
        "1.25× faster a step, with one long prompt, two, … up to the knob's share, so more "
        "decodes run beside each long prefill; one that fills the KV cache is passed over "
        "(that is kv-pressure's fault)"),
    "client-jitter": Minimum(
        "client gaps over max(250 ms, 4 × the request's median gap), no prefill inside", 4,
        "tbt-jitter's min_stalls is 3: four is 1.33× it; at 0.5 % of chunks an L4's minute "
        "(~600 chunks) holds three on average",
        "one more stall of 0.3 s up to the knob's longest on as many chunks of the window, "
        "drawn at random"),
    "slow-tokenizer": Minimum(
        "requests arriving in it (each one tokenized slowly)", 4,
        "tokenizer-overhead's min_requests is 3 within ±60 s: four is 1.33× it; an L4's minute "
        "holds two to five requests",
        "arrivals 1.25× faster a step (as an overload) until the window holds four"),
    "kv-pressure": Minimum(
        "engine stats lines (10 s apart) with the KV cache ≥ 95 % full", 2,
        "kv-pressure's floor is a full cache (kv_full 0.95); two lines are 20 s of it, half of "
        "mild's 40 s in a whole run; a burst of 4× fills a 1.5 × peak cache on an H100 at "
        "most seeds, an L4's (four requests a minute) only from ~20×",
        "the burst 1.5× stronger a step, up to 64×; a cache still never full is labelled so"),
}  # fmt: skip


@dataclass(frozen=True)
class Fitted:
    """The fitted scenario, the client stalls added to it ((request index, chunk index) →
    seconds) and, per fault id, what fitting changed (for labels.json's params)."""

    scenario: Scenario
    client_stalls: dict[tuple[int, int], float] = field(default_factory=dict)
    params: dict[str, dict[str, object]] = field(default_factory=dict)


def fit(sc: Scenario, seed: int) -> Fitted:
    """`sc` with its windowed faults raised until the window holds `WINDOW_MIN_FAULTY`."""
    f = sc.faults
    if f.window_s is None:
        return Fitted(sc)
    params: dict[str, dict[str, object]] = {}
    if f.long_output_fraction:
        sc = _long_outputs(sc, seed, params)
    if f.long_prompt_fraction:
        sc = _prefill_stalls(sc, seed, params)
    if f.tokenizer_slowdown != 1.0:
        sc = _slow_tokenizer(sc, seed, params)
    if f.overload_factor != 1.0 and is_kv_burst(sc):
        sc = _kv_burst(sc, seed, params)
    stalls = _client_stalls(sc, seed, params) if f.client_stall_prob and f.client_view else {}
    return Fitted(sc, stalls, params)


def is_kv_burst(sc: Scenario) -> bool:
    """A cache smaller than the profile's: an overload there is kv-pressure's burst."""
    return sc.engine.kv_budget_tokens < PROFILES[sc.hardware].engine.kv_budget_tokens


def _faults(sc: Scenario, **kw: object) -> Scenario:
    return replace(sc, faults=replace(sc.faults, **kw))  # type: ignore[arg-type]


def _window(sc: Scenario, seed: int) -> list[Arrival]:
    """The requests arriving inside the window, faults applied (no simulation)."""
    lo, hi = window_ns(sc.faults, sc.start_ns) or (0, 0)
    _, _, stream = arrivals(sc.workload, sc.faults, seed, sc.start_ns)
    return [a for a in stream if lo <= a.t_arrival < hi]


def _faster(sc: Scenario, seed: int, n: int) -> Scenario:
    """`sc` with arrivals faster in the window until it holds `n` (or MAX_RATE reached)."""
    factor = sc.faults.overload_factor
    while len(_window(sc, seed)) < n and factor * RATE_STEP <= MAX_RATE:
        factor = round(factor * RATE_STEP, 3)
        sc = _faults(sc, overload_factor=factor)
    return sc


def _long_outputs(sc: Scenario, seed: int, params: dict[str, dict[str, object]]) -> Scenario:
    need = WINDOW_MIN_FAULTY["long-output-tail"].count
    shortest = sc.faults.long_output_tokens[0]

    def long(s: Scenario) -> int:
        return sum(a.output_tokens >= shortest for a in _window(s, seed))

    if long(sc) >= need:
        return sc
    fitted = _faster(sc, seed, math.ceil(need / TAIL_SHARE))
    n = len(_window(fitted, seed))
    for m in range(need, n + 1):  # the quota gives m of the window's n arrivals
        fitted = _faults(fitted, long_output_fraction=min(1.0, m / n))
        if long(fitted) >= need:
            break
    have = long(fitted)
    params["long-output-tail"] = _changes(sc, fitted, window_requests=n, long_requests=have)
    if not have:
        params["long-output-tail"]["absent"] = "no request arrives in the window"
    return fitted


def _slow_tokenizer(sc: Scenario, seed: int, params: dict[str, dict[str, object]]) -> Scenario:
    need = WINDOW_MIN_FAULTY["slow-tokenizer"].count
    if len(_window(sc, seed)) >= need:
        return sc
    fitted = _faster(sc, seed, need)
    n = len(_window(fitted, seed))
    params["slow-tokenizer"] = _changes(sc, fitted, window_requests=n)
    if not n:
        params["slow-tokenizer"]["absent"] = "no request arrives in the window"
    return fitted


def _prefill_stalls(sc: Scenario, seed: int, params: dict[str, dict[str, object]]) -> Scenario:
    need = WINDOW_MIN_FAULTY["prefill-interference"].count
    stalls, _ = prefill_stalls(sc, seed)
    best, most = sc, stalls
    for rung in _rungs(sc, seed) if stalls < need else ():
        for candidate in rung:
            stalls, full = prefill_stalls(candidate, seed)
            if full:  # long prompts that fill the cache are kv-pressure's fault, not this one
                break  # (more of them at this rate fill it too)
            if stalls > most:
                best, most = candidate, stalls
            if most >= need:
                break
        if most >= need:
            break
    if best is sc and most >= need:
        return sc
    n = len(_window(best, seed))
    params["prefill-interference"] = _changes(sc, best, window_requests=n, stalls=most)
    if not most:
        params["prefill-interference"]["absent"] = "no decode ran beside a long prefill"
    return best


def _rungs(sc: Scenario, seed: int) -> Iterator[list[Scenario]]:
    """Ever more long prefills in the window, each rung in order of more long prompts. First
    more of the window's own arrivals get one; then arrivals come faster (1.25× a rung) with
    one long prompt, two, … up to the knob's share of them, so more decodes run beside each
    long prefill without a long prompt's KV."""
    n = len(_window(sc, seed))
    m, shares = round(sc.faults.long_prompt_fraction * n), []
    while m < n:
        m = min(n, max(m + 1, math.ceil(m * RATE_STEP)))
        shares.append(m / n)
    yield [_faults(sc, long_prompt_fraction=p) for p in shares]
    factor = sc.faults.overload_factor
    while factor * RATE_STEP <= MAX_RATE:
        factor = round(factor * RATE_STEP, 3)
        faster = _faults(sc, overload_factor=factor)
        n = len(_window(faster, seed))
        most = max(1, round(sc.faults.long_prompt_fraction * n))
        yield [_faults(faster, long_prompt_fraction=min(1.0, k / n)) for k in range(1, most + 1)]


def _changes(before: Scenario, after: Scenario, **counts: object) -> dict[str, object]:
    """What fitting changed, with the counts it reached."""
    out: dict[str, object] = dict(counts)
    if after.faults.overload_factor != before.faults.overload_factor:
        out["window_rate_factor"] = after.faults.overload_factor
    return out


def stall_floor_s(engine: EngineConfig) -> float:
    """prefill-interference's stall_ms on `engine`: 250 ms × how much longer a step of the
    budget (at most the reference's 8,192 tokens; with chunked prefill off, vLLM's default
    budget for the GPU) takes than on the default engine, the synth's cost model standing
    for traceq/playbooks/gpu.py's `step_time`."""

    def step(e: EngineConfig) -> float:
        budget = e.max_num_batched_tokens if e.chunked_prefill else _default_budget(e)
        return e.step_overhead_s + min(budget, REFERENCE_BUDGET) * e.prefill_per_token_s

    return STALL_S * max(1.0, step(engine) / step(EngineConfig()))


def _default_budget(e: EngineConfig) -> int:
    """vLLM's default step budget with chunked prefill on `e`'s GPU (traceq/playbooks/gpu.py,
    `default_budget`)."""
    return defaults(e.fb_total_mib / 1024, e.gpu_name)["max_num_batched_tokens"]


class _Gaps:
    """Decode gaps and prefill completions of a simulated run."""

    def __init__(self) -> None:
        self.done_t: list[int] = []  # end of each step that completed a prefill
        self.done_cum = [0]  # prompt tokens completed up to and including that step
        self.tokens: list[list[int]] = []

    def on_step(self, s: StepInfo) -> None:
        if s.prompt_tokens_done:
            self.done_t.append(s.t_end)
            self.done_cum.append(self.done_cum[-1] + s.prompt_tokens_done)

    def on_finish(self, r: Request) -> None:
        self.tokens.append(r.tokens)

    def on_preempt(self, t: int, r: Request) -> None:
        pass

    def prefilled(self, a: int, b: int) -> int:
        """Prompt tokens whose prefill completed in (a, b]."""
        return (
            self.done_cum[bisect_right(self.done_t, b)]
            - self.done_cum[bisect_right(self.done_t, a)]
        )


def prefill_stalls(sc: Scenario, seed: int) -> tuple[int, bool]:
    """(decode gaps ending in the window that prefill-interference counts as prefill stalls:
    at least `stall_floor_s` long, with LONG_PREFILL_TOKENS of prompts prefilled inside;
    whether the KV cache reached KV_FULL or preempted)."""
    lo, hi = window_ns(sc.faults, sc.start_ns) or (0, 0)
    floor = round(stall_floor_s(sc.engine) * NS)
    gaps = _Gaps()
    info = simulate(sc, seed, [gaps])
    stalls = sum(
        1
        for ts in gaps.tokens
        for a, b in pairwise(ts)
        if lo <= b < hi and b - a >= floor and gaps.prefilled(a, b) >= LONG_PREFILL_TOKENS
    )
    full = info.preemptions > 0 or info.kv_max_tokens >= KV_FULL * sc.engine.kv_budget_tokens
    return stalls, full


class _FullLines:
    """Counts the stats lines the vLLM log writer prints with the KV cache ≥ KV_FULL (its
    schedule: every STATS_INTERVAL_NS from engine ready, the state after the last step)."""

    def __init__(self, sc: Scenario) -> None:
        t_ready = sc.start_ns - round(sc.engine.startup_lead_s * NS)
        self.next = t_ready + STATS_INTERVAL_NS + STATS_OFFSET_NS
        self.budget = sc.engine.kv_budget_tokens
        self.kv = 0.0
        self.full = 0

    def on_step(self, s: StepInfo) -> None:
        while self.next < s.t_end:
            self.full += self.kv >= KV_FULL
            self.next += STATS_INTERVAL_NS
        self.kv = s.kv_used / self.budget

    def on_finish(self, r: Request) -> None:
        pass

    def on_preempt(self, t: int, r: Request) -> None:
        pass


def full_lines(sc: Scenario, seed: int) -> int:
    """Stats lines of the run with the KV cache full."""
    sink = _FullLines(sc)
    simulate(sc, seed, [sink])
    return sink.full


def _kv_burst(sc: Scenario, seed: int, params: dict[str, dict[str, object]]) -> Scenario:
    need = WINDOW_MIN_FAULTY["kv-pressure"].count
    fitted, full = sc, full_lines(sc, seed)
    while full < need and fitted.faults.overload_factor * BURST_STEP <= MAX_BURST:
        factor = round(fitted.faults.overload_factor * BURST_STEP, 3)
        fitted = _faults(fitted, overload_factor=factor)
        full = full_lines(fitted, seed)
    if fitted is not sc:
        params["kv-pressure"] = {"full_stats_lines": full, "rate_factor": sc.faults.overload_factor}
    return fitted


class _ClientGaps:
    """Runs the client view over a simulated run (in the order the OTLP writer does) and
    finds its stalls inside the window, and the chunks a stall could be added to."""

    def __init__(self, sc: Scenario, seed: int) -> None:
        self.view = ClientView(sc.faults, seed, sc.start_ns)
        self.lo, self.hi = window_ns(sc.faults, sc.start_ns) or (0, 0)
        self.slack = round(max(sc.faults.client_stall_s) * NS)  # a gap an added stall widens
        self.prefills: list[int] = []  # end of each step that completed a prefill
        self.stalls = 0
        self.free: list[tuple[int, int]] = []

    def on_step(self, s: StepInfo) -> None:
        if s.prompt_tokens_done:
            self.prefills.append(s.t_end)

    def on_preempt(self, t: int, r: Request) -> None:
        pass

    def _prefill_in(self, a: int, b: int) -> bool:
        i = bisect_right(self.prefills, a)
        return i < len(self.prefills) and self.prefills[i] <= b

    def on_finish(self, r: Request) -> None:
        _, out, _ = self.view(r)
        if len(out) < 3:
            return
        gaps = [b - a for a, b in pairwise(out)]
        floor = max(STALL_K * statistics.median(gaps), STALL_S * NS)
        stalled = {k + 1 for k, g in enumerate(gaps) if g > floor}
        for k in range(1, len(out)):
            if not self.lo <= r.tokens[k] < self.hi:
                continue
            prefill = self._prefill_in(r.tokens[k - 1], r.tokens[k] + self.slack)
            if k in stalled:
                self.stalls += not prefill  # one a prefill may explain can read as a step
            elif not prefill and not {k - 1, k + 1} & stalled:
                self.free.append((r.idx, k))


def _client_stalls(
    sc: Scenario, seed: int, params: dict[str, dict[str, object]]
) -> dict[tuple[int, int], float]:
    need = WINDOW_MIN_FAULTY["client-jitter"].count
    sink = _ClientGaps(sc, seed)
    simulate(sc, seed, [sink])
    if sink.stalls >= need:
        return {}
    r = rng(seed, "client-top-up")
    chosen = sorted(r.sample(sink.free, min(need - sink.stalls, len(sink.free))))
    shortest, longest = (max(s, TOP_UP_STALL_S) for s in sc.faults.client_stall_s)
    params["client-jitter"] = {"stalls_in_window": sink.stalls, "stalls_added": len(chosen)}
    if not sink.stalls and not chosen:
        params["client-jitter"]["absent"] = "no chunk is streamed in the window"
    return {key: round(r.uniform(shortest, longest), 3) for key in chosen}


def markdown() -> str:
    """`WINDOW_MIN_FAULTY` as Markdown (docs/SYNTH.md embeds it with the knob tables)."""
    lines = [
        "| windowed scenario | the window holds at least | why | raised by |",
        "|---|---|---|---|",
    ]
    for name, m in WINDOW_MIN_FAULTY.items():
        lines.append(f"| `{name}` | {m.count} {m.what} | {m.reason} | {m.how} |")
    return "\n".join(lines) + "\n"
