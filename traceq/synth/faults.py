"""Fault bookkeeping: which knobs a scenario turned on, their time windows (labels.json), and
the client-side view of the stream (network delay and stalls that only the client sees)."""

from __future__ import annotations

from dataclasses import dataclass

from traceq.synth.arrivals import rng
from traceq.synth.config import EngineConfig, FaultConfig, Scenario
from traceq.synth.engine import NS, Request, window_ns
from traceq.synth.sim import RunInfo


class ClientView:
    """Client-side times: one-way delay, plus random stalls that hold back a chunk and every
    chunk queued behind it (TCP delivers in order)."""

    def __init__(self, f: FaultConfig, seed: int, start_ns: int = 0) -> None:
        self.f = f
        self.r = rng(seed, "client")
        self.delay = round(f.network_delay_s * NS)
        self.window = window_ns(f, start_ns) or (-1, 1 << 62)  # stalls only inside

    def __call__(self, req: Request) -> tuple[int, list[int], int]:
        f, r, d = self.f, self.r, self.delay
        lo, hi = self.window
        out: list[int] = []
        prev = 0
        for ts in req.tokens:
            x = ts + d
            if f.client_stall_prob and r.random() < f.client_stall_prob and lo <= ts < hi:
                x += round(r.uniform(*f.client_stall_s) * NS)
            prev = max(prev, x)
            out.append(prev)
        return req.t_arrival - d, out, (out[-1] if out else req.t_end + d)


@dataclass(frozen=True)
class FaultSpec:
    """What an injected fault is, for scoring a diagnosis against it (docs/SYNTH.md, Labels)."""

    cause: str  # the root-cause id a playbook should rank first
    expected: tuple[str, ...]  # playbook ids (SPEC §5) that must fire
    tolerated: tuple[str, ...] = ()  # true side effects: may fire, neither hit nor false alarm


# Every fault the generator can inject. Playbook ids are SPEC §5's; a cause id names the
# injected root cause the way the matching playbook's cause should be named.
FAULTS: dict[str, FaultSpec] = {
    "long-output-tail": FaultSpec("long-outputs", ("long-request-tail",), ("slo-goodput",)),
    "client-jitter": FaultSpec("client-side-stalls", ("tbt-jitter",), ("slo-goodput",)),
    "prefill-interference": FaultSpec(
        "long-prompt-prefills",
        ("prefill-interference", "tbt-jitter"),
        ("ttft-prefill", "ttft-queueing", "long-request-tail", "slo-goodput"),
    ),
    "kv-pressure": FaultSpec(
        "kv-cache-exhausted",
        ("kv-pressure",),
        # A prompt larger than the whole cache is rejected (vLLM's "does not fit" error).
        ("ttft-queueing", "tbt-jitter", "long-request-tail", "slo-goodput", "error-rate"),
    ),
    "queue-overload": FaultSpec(
        "arrivals-above-capacity", ("ttft-queueing",), ("long-request-tail", "slo-goodput")
    ),
    "slow-tokenizer": FaultSpec(
        "slow-tokenizer", ("tokenizer-overhead",), ("gpu-underutilized", "slo-goodput")
    ),
    "warm-up-skew": FaultSpec(
        "engine-warm-up",
        ("warm-up-skew",),
        ("slow-decode", "ttft-queueing", "tbt-jitter", "long-request-tail", "slo-goodput"),
    ),
    "gpu-throttle": FaultSpec(
        "gpu-clock-throttled",
        ("slow-decode",),
        ("tbt-jitter", "long-request-tail", "slo-goodput"),
    ),
    "fixed-length-load": FaultSpec("fixed-lengths", ("unrealistic-load",)),
    "rejected-requests": FaultSpec("prompt-too-long", ("error-rate",), ("slo-goodput",)),
    "request-timeouts": FaultSpec(
        "client-timeouts",
        ("error-rate",),
        ("ttft-queueing", "long-request-tail", "slo-goodput"),
    ),
    "low-prefix-reuse": FaultSpec(
        "prefix-cache-misses", ("ttft-prefill",), ("ttft-queueing", "slo-goodput")
    ),
}


def _span(lo: int, hi: int) -> list[dict[str, int]]:
    return [{"start": lo, "end": hi}]


def injected(sc: Scenario, info: RunInfo) -> list[dict]:
    """The faults a scenario injects, for labels.json: fault id, cause id, the windows where
    it is active (ns since the epoch, UTC), the playbooks that must / may fire, parameters."""
    f, c, d = sc.faults, sc.engine, FaultConfig()
    e = EngineConfig()
    windowed = window_ns(f, info.t_first_arrival)
    whole = _span(*windowed) if windowed else _span(info.t_first_arrival, info.t_end)
    out: list[dict] = []

    def add(name: str, windows: list[dict[str, int]], **params: object) -> None:
        spec = FAULTS[name]
        out.append(
            {
                "fault": name,
                "cause": spec.cause,
                "windows": windows,
                "expected_playbooks": list(spec.expected),
                "tolerated_playbooks": list(spec.tolerated),
                "params": params,
            }
        )

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
            chunked_prefill=c.chunked_prefill,
        )
    if c.kv_budget_tokens < e.kv_budget_tokens:
        add(
            "kv-pressure",
            whole,
            kv_budget_tokens=c.kv_budget_tokens,
            max_num_seqs=c.max_num_seqs,
            preemptions=info.preemptions,
        )
    timeouts = f.timeout_s is not None
    kv_burst = c.kv_budget_tokens < e.kv_budget_tokens  # an overload there fills the KV cache
    if info.overload_ns and not timeouts and not kv_burst:
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
            out[-1]["tolerated_playbooks"] = out[-1]["expected_playbooks"]
            out[-1]["expected_playbooks"] = []
    if f.error_fraction:
        add("rejected-requests", whole, rejected_fraction=f.error_fraction)
    if timeouts:
        add(
            "request-timeouts",
            _span(*info.overload_ns) if info.overload_ns else whole,
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
    return out


def summary(faults: list[dict]) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """(expected playbooks, tolerated playbooks not expected, playbook → injected cause ids)."""
    expected: list[str] = []
    tolerated: list[str] = []
    causes: dict[str, list[str]] = {}
    for x in faults:
        for p in x["expected_playbooks"]:
            if p not in expected:
                expected.append(p)
            if x["cause"] not in causes.setdefault(p, []):
                causes[p].append(x["cause"])
    for x in faults:
        tolerated += [p for p in x["tolerated_playbooks"] if p not in expected + tolerated]
    return expected, tolerated, causes
