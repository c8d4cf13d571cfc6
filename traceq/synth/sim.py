"""The simulation driver: arrivals → tokenizer → engine steps, with timeouts and rejections,
fanned out to sinks (writers, truth collectors) as it happens."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from traceq.synth.arrivals import arrivals, rng
from traceq.synth.config import Scenario
from traceq.synth.engine import NS, Engine, Request, Sink, StepInfo, tokenize_stage, window_ns


def request_ids(seed: int) -> Iterator[str]:
    """vLLM completion ids: `cmpl-<32 hex>-0` (the `-0` is the prompt index)."""
    r = rng(seed, "request-ids")
    while True:
        yield f"cmpl-{r.getrandbits(128):032x}-0"


@dataclass
class RunInfo:
    """What the writers need to know about the run beyond the per-request stream."""

    scenario: Scenario
    seed: int
    t_ready: int  # engine ready ("Application startup complete")
    t_first_arrival: int
    span_ns: int  # arrival span
    overload_ns: tuple[int, int] | None = None  # arrivals `overload_factor` × faster
    throttle_ns: tuple[int, int] | None = None  # GPU throttled (step cost × throttle_factor)
    t_end: int = 0  # last engine activity
    requests: int = 0
    preemptions: int = 0
    kv_max_tokens: int = 0


class Fanout:
    """Several sinks behind one."""

    def __init__(self, sinks: Sequence[Sink]) -> None:
        self.sinks = list(sinks)

    def on_finish(self, r: Request) -> None:
        for s in self.sinks:
            s.on_finish(r)

    def on_step(self, s: StepInfo) -> None:
        for k in self.sinks:
            k.on_step(s)

    def on_preempt(self, t: int, r: Request) -> None:
        for s in self.sinks:
            s.on_preempt(t, r)

    def on_arrival(self, r: Request) -> None:
        for s in self.sinks:
            hook = getattr(s, "on_arrival", None)
            if hook:
                hook(r)


def plan(scenario: Scenario, seed: int) -> tuple[RunInfo, Iterator[Request]]:
    """The run's clock and its tokenized requests, not yet simulated."""
    c, w, f = scenario.engine, scenario.workload, scenario.faults
    start = scenario.start_ns
    span, overload, stream = arrivals(w, f, seed, start)
    lo, hi = f.throttle_window
    info = RunInfo(
        scenario=scenario,
        seed=seed,
        t_ready=start - round(c.startup_lead_s * NS),
        t_first_arrival=start,
        span_ns=span,
        overload_ns=overload,
        throttle_ns=(window_ns(f, start) or (start + int(lo * span), start + int(hi * span)))
        if f.throttle_factor != 1.0
        else None,
    )
    return info, tokenize_stage(stream, c, f, seed, request_ids(seed))


def simulate(
    scenario: Scenario,
    seed: int,
    sinks: Sequence[Sink],
    admit: Callable[[Iterator[Request]], Iterator[Request]] | None = None,
) -> RunInfo:
    """Run the scenario, streaming every event to `sinks`; returns the run's summary.

    `admit` filters the tokenized requests before the engine sees them (a gateway in front of
    the engines that fails some requests: traceq/synth/write_disagg.py)."""
    info, requests = plan(scenario, seed)
    if admit is not None:
        requests = admit(requests)
    f = scenario.faults
    engine = Engine(scenario.engine, f, info.t_ready, info.throttle_ns)
    timeout_ns = round(f.timeout_s * NS) if f.timeout_s else 0
    info.t_end, info.requests = drive(
        engine, requests, info.t_first_arrival, Fanout(sinks), timeout_ns
    )
    info.preemptions = engine.preemptions
    info.kv_max_tokens = engine.kv_max
    return info


def drive(
    engine: Engine, requests: Iterator[Request], t_start: int, out: Fanout, timeout_ns: int = 0
) -> tuple[int, int]:
    """Feed tokenized `requests` (in queue order) to `engine` and step it until every request
    has finished; returns (time of the last engine activity, requests fed). The one driver
    of the engine model: `traceq synth` (`simulate`) and `traceq whatif`
    (traceq/whatif/replay.py) both run it. `timeout_ns` > 0 aborts a request that long
    after its arrival (a client timeout)."""
    max_model_len = engine.cfg.max_model_len
    deadlines: list[tuple[int, int, Request]] = []
    n = 0
    pending = next(requests, None)
    t = t_start
    while True:
        while pending is not None and pending.t_queued <= t:
            n += 1
            out.on_arrival(pending)
            if pending.arrival.rejected:
                pending.error = "BadRequestError"
                pending.status_message = (
                    f"This model's maximum context length is {max_model_len} "
                    f"tokens. However, you requested {pending.prompt} tokens in the messages."
                )
                pending.t_end = pending.t_tokenized
                out.on_finish(pending)
            else:
                engine.waiting.append(pending)
                engine.n_waiting += 1
                if timeout_ns:
                    heapq.heappush(
                        deadlines, (pending.t_arrival + timeout_ns, pending.idx, pending)
                    )
            pending = next(requests, None)
        while deadlines and deadlines[0][0] <= t:
            when, _, r = heapq.heappop(deadlines)
            if r.finish_reason is None:
                engine.abort(r, when, out)
        if not engine.running and engine.n_waiting == 0:
            if pending is None:
                break
            t = max(t, pending.t_queued)
            continue
        t_next = engine.step(t, out)
        if t_next == t:  # blocked (nothing fits): jump to the next arrival or deadline
            candidates = [pending.t_queued] if pending is not None else []
            candidates += [deadlines[0][0]] if deadlines else []
            if not candidates:
                break
            t_next = max(t + 1, min(candidates))
        t = t_next
    return t, n


class Collect:
    """A sink that keeps every finished request, every step and every preemption (tests)."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.steps: list[StepInfo] = []
        self.preemptions: list[tuple[int, str]] = []

    def on_finish(self, r: Request) -> None:
        self.requests.append(r)

    def on_step(self, s: StepInfo) -> None:
        self.steps.append(s)

    def on_preempt(self, t: int, r: Request) -> None:
        self.preemptions.append((t, r.request_id))
