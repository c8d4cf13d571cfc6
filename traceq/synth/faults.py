"""Fault bookkeeping: which knobs a scenario turned on, their time windows (labels.json), and
the client-side view of the stream (network delay and stalls that only the client sees)."""

from __future__ import annotations

from traceq.synth.arrivals import rng
from traceq.synth.config import EngineConfig, FaultConfig, Scenario
from traceq.synth.engine import NS, Request
from traceq.synth.sim import RunInfo


class ClientView:
    """Client-side times: one-way delay, plus random stalls that hold back a chunk and every
    chunk queued behind it (TCP delivers in order)."""

    def __init__(self, f: FaultConfig, seed: int) -> None:
        self.f = f
        self.r = rng(seed, "client")
        self.delay = round(f.network_delay_s * NS)

    def __call__(self, req: Request) -> tuple[int, list[int], int]:
        f, r, d = self.f, self.r, self.delay
        out: list[int] = []
        prev = 0
        for ts in req.tokens:
            x = ts + d
            if f.client_stall_prob and r.random() < f.client_stall_prob:
                x += round(r.uniform(*f.client_stall_s) * NS)
            prev = max(prev, x)
            out.append(prev)
        return req.t_arrival - d, out, (out[-1] if out else req.t_end + d)


def _window(info: RunInfo, frac: tuple[float, float]) -> list[int]:
    a = info.t_first_arrival
    return [a + int(frac[0] * info.span_ns), a + int(frac[1] * info.span_ns)]


def injected(sc: Scenario, info: RunInfo) -> list[dict]:
    """The faults a scenario injects, with windows (ns) and parameters, for labels.json."""
    f, c, d = sc.faults, sc.engine, FaultConfig()
    e = EngineConfig()
    whole = [info.t_first_arrival, info.t_end]
    out: list[dict] = []

    def add(name: str, window: list[int], **params: object) -> None:
        out.append({"fault": name, "window_ns": window, "params": params})

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
    if f.overload_factor != d.overload_factor:
        add(
            "queue-overload",
            _window(info, f.overload_window),
            rate_factor=f.overload_factor,
            max_num_seqs=c.max_num_seqs,
        )
    if f.tokenizer_slowdown != d.tokenizer_slowdown:
        add("slow-tokenizer", whole, slowdown=f.tokenizer_slowdown)
    if c.warmup_s:
        end = info.t_ready + round(c.warmup_s * NS)
        add(
            "warm-up-skew",
            [info.t_ready, end],
            step_cost_factor=c.warmup_factor,
            warmup_s=c.warmup_s,
        )
    if f.throttle_factor != d.throttle_factor:
        add(
            "gpu-throttle",
            _window(info, f.throttle_window),
            step_cost_factor=f.throttle_factor,
            sm_clock_mhz=f.throttle_clock_mhz,
        )
    if f.fixed_lengths:
        add(
            "fixed-length-load",
            whole,
            prompt_tokens=f.fixed_lengths[0],
            output_tokens=f.fixed_lengths[1],
        )
    if f.error_fraction or f.timeout_s:
        add("errors", whole, rejected_fraction=f.error_fraction, timeout_s=f.timeout_s)
    if not c.prefix_caching and e.prefix_caching:
        add("low-prefix-reuse", whole, prefix_caching=False)
    return out
