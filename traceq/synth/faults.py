"""Fault bookkeeping: which knobs a scenario turned on, their time windows (labels.json), and
the client-side view of the stream (network delay and stalls that only the client sees)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from traceq.synth.arrivals import rng
from traceq.synth.config import FaultConfig, Scenario
from traceq.synth.engine import NS, Request, window_ns
from traceq.synth.hardware import PROFILES
from traceq.synth.sim import RunInfo


class ClientView:
    """Client-side times: one-way delay, plus random stalls that hold back a chunk and every
    chunk queued behind it (TCP delivers in order). `extra`: stalls added to chunks by
    (request index, chunk index) → seconds (traceq/synth/fit.py tops a window up with them)."""

    def __init__(
        self,
        f: FaultConfig,
        seed: int,
        start_ns: int = 0,
        extra: Mapping[tuple[int, int], float] | None = None,
    ) -> None:
        self.f = f
        self.r = rng(seed, "client")
        self.delay = round(f.network_delay_s * NS)
        self.window = window_ns(f, start_ns) or (-1, 1 << 62)  # stalls only inside
        self.extra = {k: round(s * NS) for k, s in (extra or {}).items()}

    def __call__(self, req: Request) -> tuple[int, list[int], int]:
        f, r, d, extra = self.f, self.r, self.delay, self.extra
        lo, hi = self.window
        out: list[int] = []
        prev = 0
        for k, ts in enumerate(req.tokens):
            x = ts + d
            if f.client_stall_prob and r.random() < f.client_stall_prob and lo <= ts < hi:
                x += round(r.uniform(*f.client_stall_s) * NS)
            elif extra and (req.idx, k) in extra:
                x += extra[(req.idx, k)]
            prev = max(prev, x)
            out.append(prev)
        return req.t_arrival - d, out, (out[-1] if out else req.t_end + d)


@dataclass(frozen=True)
class FaultSpec:
    """What an injected fault is, for scoring a diagnosis against it (docs/SYNTH.md, Labels).

    Cause ids are the playbooks' own (the `causes[].id` of traceq/playbooks/catalog/*.yaml,
    which users see in findings); tests/test_synth_labels.py checks every one exists there."""

    # expected playbook (its id in traceq/playbooks/catalog/) → the ids of its causes the fault
    # injects in every variant: what that playbook's top-ranked cause should be
    causes: dict[str, tuple[str, ...]]
    tolerated: tuple[str, ...] = ()  # true side effects: may fire, neither hit nor false alarm
    # causes only some variants inject too, added by `injected` where the condition holds
    # (the comment there says which)
    variant_causes: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def expected(self) -> tuple[str, ...]:
        """The playbooks that must fire for this fault."""
        return tuple(self.causes)


# Every fault the generator can inject.
FAULTS: dict[str, FaultSpec] = {
    "long-output-tail": FaultSpec({"long-request-tail": ("long-outputs",)}, ("slo-goodput",)),
    "client-jitter": FaultSpec({"tbt-jitter": ("client-only",)}, ("slo-goodput",)),
    "prefill-interference": FaultSpec(
        {"prefill-interference": ("long-prompts-mixed",)},
        # the stalls are the fault's own symptom: tbt-jitter fires on them when they cross
        # its rate (strong runs; a mild one stalls fewer streams), folded under the root
        ("tbt-jitter", "ttft-prefill", "ttft-queueing", "long-request-tail", "slo-goodput"),
        # whole runs turn chunked prefill off (traceq/synth/scenarios.py); windowed keep it on
        variant_causes={"prefill-interference": ("chunked-prefill-off",)},
    ),
    "kv-pressure": FaultSpec(
        {"kv-pressure": ("kv-saturated",)},
        # A prompt larger than the whole cache is rejected (vLLM's "does not fit" error).
        ("ttft-queueing", "tbt-jitter", "long-request-tail", "slo-goodput", "error-rate"),
        # whole runs shrink the budget below the traffic's own peak need; windowed runs keep a
        # cache with headroom and overflow it with a burst of arrivals
        variant_causes={"kv-pressure": ("kv-budget-small",)},
    ),
    "queue-overload": FaultSpec(
        # max_num_seqs=4 (default 256) is part of the scenario: the cap the burst queues at
        {"ttft-queueing": ("arrival-burst", "concurrency-cap")},
        ("long-request-tail", "slo-goodput"),
    ),
    "slow-tokenizer": FaultSpec(
        {"tokenizer-overhead": ("slow-tokenizer",)}, ("gpu-underutilized", "slo-goodput")
    ),
    "warm-up-skew": FaultSpec(
        {"warm-up-skew": ("right-after-startup",)},
        # steps several times slower at start-up: decode, queueing, stalls, and prefills
        # slow enough that TTFT is mostly prefill (ttft-prefill)
        (
            "slow-decode",
            "ttft-queueing",
            "tbt-jitter",
            "long-request-tail",
            "slo-goodput",
            "ttft-prefill",
        ),
    ),
    "gpu-throttle": FaultSpec(
        {"slow-decode": ("gpu-throttle",)}, ("tbt-jitter", "long-request-tail", "slo-goodput")
    ),
    # the generator fixes both lengths (and max_tokens = the output length)
    "fixed-length-load": FaultSpec({"unrealistic-load": ("fixed-prompts", "fixed-outputs")}),
    "rejected-requests": FaultSpec({"error-rate": ("rejected-inputs",)}, ("slo-goodput",)),
    "request-timeouts": FaultSpec(
        {"error-rate": ("timeouts",)},
        ("ttft-queueing", "long-request-tail", "slo-goodput"),
        # the timeouts are reached by an overload window (the `errors` scenario's burst)
        variant_causes={"error-rate": ("overload",)},
    ),
    # written only by the disaggregated conventions (traceq/synth/write_disagg.py): requests
    # the gateway fails before any engine sees them
    "gateway-failures": FaultSpec({"error-rate": ("not-served",)}, ("slo-goodput",)),
    # "off, or never hits": strong whole runs turn caching off, the others salt requests
    "low-prefix-reuse": FaultSpec(
        {"ttft-prefill": ("prefix-cache-off",)},
        # every prompt's ~7 k tokens prefilled again: a request arriving during another's
        # prefill queues behind it, and decode steps carry the prefills (slow-decode:
        # prefill-load)
        ("ttft-queueing", "slo-goodput", "slow-decode"),
    ),
}


def _span(lo: int, hi: int) -> list[dict[str, int]]:
    return [{"start": lo, "end": hi}]


def fault_entry(
    name: str, windows: list[dict[str, int]], variant: bool = False, **params: object
) -> dict:
    """One entry of labels.json `faults`: the fault `name` of FAULTS, active in `windows`;
    `variant` adds the causes only some variants inject."""
    spec = FAULTS[name]
    causes = {p: list(ids) for p, ids in spec.causes.items()}
    for p, ids in spec.variant_causes.items() if variant else ():
        causes[p] += ids
    return {
        "fault": name,
        "causes": causes,
        "windows": windows,
        "expected_playbooks": list(spec.expected),
        "tolerated_playbooks": list(spec.tolerated),
        "params": params,
    }


def injected(
    sc: Scenario, info: RunInfo, fitted: Mapping[str, Mapping[str, object]] | None = None
) -> list[dict]:
    """The faults a scenario injects, for labels.json: fault id, cause id, the windows where
    it is active (ns since the epoch, UTC), the playbooks that must / may fire, parameters.
    `fitted`: per fault id, what traceq/synth/fit.py raised (added to its parameters); a
    fault whose parameters say `absent` is not there to find (its playbooks are tolerated)."""
    fitted = fitted or {}
    f, c, d = sc.faults, sc.engine, FaultConfig()
    e = PROFILES[sc.hardware].engine  # what is normal on this hardware
    windowed = window_ns(f, info.t_first_arrival)
    whole = _span(*windowed) if windowed else _span(info.t_first_arrival, info.t_end)
    out: list[dict] = []

    def add(
        name: str, windows: list[dict[str, int]], variant: bool = False, **params: object
    ) -> None:
        params.update(fitted.get(name, {}))
        out.append(fault_entry(name, windows, variant, **params))

    if f.long_output_fraction:
        add(
            "long-output-tail",
            whole,
            fraction=f.long_output_fraction,
            output_tokens=list(f.long_output_tokens),
        )
    if f.client_stall_prob:
        add(
            "client-jitter",
            whole,
            stall_probability=f.client_stall_prob,
            stall_s=list(f.client_stall_s),
        )
    if f.long_prompt_fraction:
        add(
            "prefill-interference",
            whole,
            fraction=f.long_prompt_fraction,
            prompt_tokens=list(f.long_prompt_tokens),
            variant=not c.chunked_prefill,
            chunked_prefill=c.chunked_prefill,
        )
    if c.kv_budget_tokens < e.kv_budget_tokens:
        add(
            "kv-pressure",
            whole,
            variant=not info.overload_ns,  # no burst: the small budget alone is the fault
            kv_budget_tokens=c.kv_budget_tokens,
            max_num_seqs=c.max_num_seqs,
            preemptions=info.preemptions,
        )
        if windowed and not info.preemptions:  # the burst never filled the cache
            out[-1]["params"]["absent"] = "the burst never filled the cache: 0 preemptions"
    timeouts = f.timeout_s is not None
    kv_burst = c.kv_budget_tokens < e.kv_budget_tokens  # an overload there fills the KV cache
    # fit.py brings arrivals into a window too thin for its fault: no overload of its own
    raised = any("window_rate_factor" in p for p in fitted.values())
    if info.overload_ns and not timeouts and not kv_burst and not raised:
        add(
            "queue-overload",
            _span(*info.overload_ns),
            rate_factor=f.overload_factor,
            max_num_seqs=c.max_num_seqs,
        )
    if f.tokenizer_slowdown != d.tokenizer_slowdown:
        add("slow-tokenizer", whole, slowdown=f.tokenizer_slowdown)
    if c.warmup_s:
        end = info.t_ready + round(c.warmup_s * NS)
        add(
            "warm-up-skew",
            _span(info.t_ready, end),
            step_cost_factor=c.warmup_factor,
            warmup_s=c.warmup_s,
        )
    if info.throttle_ns:
        add(
            "gpu-throttle",
            _span(*info.throttle_ns),
            step_cost_factor=f.throttle_factor,
            sm_clock_mhz=f.throttle_clock_mhz,
        )
    if f.fixed_lengths:
        add(
            "fixed-length-load",
            whole,
            prompt_tokens=f.fixed_lengths[0],
            output_tokens=f.fixed_lengths[1],
            spread=f.fixed_length_spread,
        )
        if windowed:  # unrealistic-load judges the whole test's lengths, not a slice of it
            _not_expected(out[-1])
    if f.error_fraction:
        add("rejected-requests", whole, rejected_fraction=f.error_fraction)
    if timeouts:
        add(
            "request-timeouts",
            _span(*info.overload_ns) if info.overload_ns else whole,
            variant=bool(info.overload_ns),
            timeout_s=f.timeout_s,
            rate_factor=f.overload_factor,
            max_num_seqs=c.max_num_seqs,
        )
    if (not c.prefix_caching and e.prefix_caching) or f.cache_salt_fraction:
        add(
            "low-prefix-reuse",
            whole,
            prefix_caching=c.prefix_caching,
            cache_salt_fraction=f.cache_salt_fraction,
        )
    for x in out:
        if "absent" in x["params"]:
            _not_expected(x)
    return out


def _not_expected(fault: dict) -> None:
    """The fault is labelled but not there to find: its playbooks may fire, none must."""
    fault["tolerated_playbooks"] = fault["expected_playbooks"] + fault["tolerated_playbooks"]
    fault["expected_playbooks"] = []


def summary(faults: list[dict]) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """(expected playbooks, tolerated playbooks not expected, playbook → injected cause ids)."""
    expected: list[str] = []
    tolerated: list[str] = []
    causes: dict[str, list[str]] = {}
    for x in faults:
        for p in x["expected_playbooks"]:
            if p not in expected:
                expected.append(p)
            have = causes.setdefault(p, [])
            have += [c for c in x["causes"].get(p, []) if c not in have]
    for x in faults:
        tolerated += [p for p in x["tolerated_playbooks"] if p not in expected + tolerated]
    return expected, tolerated, causes
