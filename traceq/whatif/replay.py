"""Replay the calibrated workload through the engine model of `traceq synth`
(traceq/synth/engine.py, driven by traceq/synth/sim.py's `drive`): the fitted step costs and
front time, the limits of a scenario, one engine per replica with the arrivals dealt round
robin. The outcome's figures follow docs/METRICS.md (TTFT from arrival, TPOT per request,
TBT pooled over every gap, SLO attainment and goodput as `traceq report` counts them).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from traceq.synth.config import EngineConfig, FaultConfig
from traceq.synth.engine import Engine, Request, StepInfo, tokenize_stage
from traceq.synth.sim import Fanout, drive
from traceq.whatif.calibrate import FrontFit, StepFit
from traceq.whatif.limits import Limits
from traceq.whatif.model import Outcome, Quantiles
from traceq.whatif.speed import Speed
from traceq.whatif.workload import Workload

NS = 1_000_000_000

EXTRAPOLATION = 1.5
"""A replay whose decode batches grow past this multiple of the calibration run's largest
says so: the step-time fit is a line measured only up to that batch."""

NO_FAULTS = FaultConfig()
"""A replay injects nothing: the engine runs as calibrated."""


@dataclass(frozen=True)
class Model:
    """The calibrated engine and workload a replay runs."""

    steps: StepFit
    front: FrontFit
    workload: Workload
    speed: Speed | None = None
    instance_speed: dict[str, float] | None = None
    """Each instance's step-cost factor, when the run's instances are not alike (speed.py)."""


def engine_config(model: Model, limits: Limits) -> EngineConfig:
    """The synth engine with the fitted costs and the scenario's limits. The prefix cache
    lives in the KV cache's free blocks, so it is as large as the KV cache."""
    kv = int(limits.value("kv_cache_tokens"))
    t = model.steps.terms
    return replace(
        EngineConfig(),
        kv_budget_tokens=kv,
        prefix_cache_tokens=kv,
        max_num_seqs=int(limits.value("max_num_seqs")),
        max_num_batched_tokens=int(limits.value("max_num_batched_tokens")),
        chunked_prefill=bool(limits.value("chunked_prefill")),
        prefix_caching=bool(limits.value("prefix_caching")),
        max_model_len=limits.max_model_len or EngineConfig().max_model_len,
        tensor_parallel_size=limits.tensor_parallel,
        tokenize_base_s=model.front.base_s,
        tokenize_per_token_s=model.front.per_token_s,
        ipc_s=0.0,
        startup_lead_s=0.0,
        step_overhead_s=t["step_overhead_s"],
        decode_per_seq_s=t["decode_per_seq_s"],
        decode_per_kv_token_s=t["decode_per_kv_token_s"],
        prefill_per_token_s=t["prefill_per_token_s"],
        prefill_attn_per_token2_s=t["prefill_attn_per_token2_s"],
    )


class _Keep:
    """A sink that keeps the finished requests and the largest decode batch."""

    def __init__(self) -> None:
        self.done: list[Request] = []
        self.max_decode = 0
        self.preemptions = 0

    def on_finish(self, r: Request) -> None:
        self.done.append(r)

    def on_step(self, s: StepInfo) -> None:
        if s.n_decode > self.max_decode:
            self.max_decode = s.n_decode

    def on_preempt(self, t: int, r: Request) -> None:
        self.preemptions += 1


def replay(
    model: Model,
    limits: Limits,
    rate_rps: float,
    seed: int,
    slo: dict[str, float | None],
    gpu_hour_usd: float,
    label: str = "",
    observed_speed: bool = False,
) -> Outcome:
    """One scenario: the workload at `rate_rps` (seed 0: the run's own requests; workload.py)
    through one engine per replica. With `observed_speed` (the run as it was, at its own rate:
    the back-test and a playbook's cited setting change) the steps follow the GPU's speed
    timeline of the run (speed.py); every other scenario runs the GPU at its usual speed,
    factor 1, since a throttle or a warm-up is an incident of the run at its own times, not a
    property of the engine at another rate or setting. The run's client timeout, if it had
    one (workload.py), ends requests in every scenario; with as many replicas as the run's
    unlike instances, replica k runs at instance k's step-cost factor (speed.py)."""
    speed = model.speed if observed_speed else None
    cfg = engine_config(model, limits)
    arrivals = model.workload.arrivals(rate_rps, seed)
    replicas = int(limits.value("replicas"))
    keep = _Keep()
    out = Fanout([keep])
    ids = (f"whatif-{i}" for i in itertools.count())
    warm = model.workload.warm_blocks() if cfg.prefix_caching else ()
    own = model.instance_speed
    factors = list(own.values()) if own and len(own) == replicas else None
    for k in range(replicas):
        part = arrivals[k::replicas]
        if not part:
            continue
        engine = Engine(cfg, NO_FAULTS, part[0].t_arrival, None, _speed(speed, factors, k))
        engine.warm_prefix(warm)
        requests = tokenize_stage(iter(part), cfg, NO_FAULTS, seed + k, ids)
        drive(engine, requests, part[0].t_arrival, out, model.workload.timeout_ns)
    return _outcome(keep, model, limits, rate_rps, seed, slo, gpu_hour_usd, label)


def _speed(
    timeline: Speed | None, factors: list[float] | None, k: int
) -> Callable[[int], float] | None:
    """Replica k's step-cost factor over time: the run's speed timeline (when replayed) times
    its instance's factor (when the replicas are the run's unlike instances)."""
    if factors is None:
        return timeline.at if timeline else None
    g = factors[k]
    if timeline is None:
        return lambda t: g
    return lambda t: g * timeline.at(t)


def _outcome(
    keep: _Keep,
    model: Model,
    limits: Limits,
    rate_rps: float,
    seed: int,
    slo: dict[str, float | None],
    gpu_hour_usd: float,
    label: str,
) -> Outcome:
    done = keep.done
    ok = [r for r in done if r.error is None and r.t_first_token is not None and r.tokens]
    n = len(ok)
    arrival = np.fromiter((r.t_arrival for r in ok), np.int64, n)
    first = np.fromiter((r.tokens[0] for r in ok), np.int64, n)
    last = np.fromiter((r.tokens[-1] for r in ok), np.int64, n)
    counts = np.fromiter((len(r.tokens) for r in ok), np.int64, n)
    ttft = (first - arrival) / 1e6
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(counts > 1, (last - first) / 1e6 / (counts - 1), np.nan)
    e2e = (last - arrival) / 1e6
    stamps = np.fromiter(
        itertools.chain.from_iterable(r.tokens for r in ok), np.int64, int(counts.sum())
    )
    gaps = np.diff(stamps).astype(float) / 1e6
    keep_gap = np.ones(len(gaps), bool)
    keep_gap[np.cumsum(counts)[:-1] - 1] = False  # the gap across two requests is none
    good = np.ones(n, bool)
    limit = {k: v for k, v in slo.items() if v is not None}
    if "ttft_ms" in limit:
        good &= ttft <= limit["ttft_ms"]
    if "tpot_ms" in limit:
        good &= np.isnan(tpot) | (tpot <= limit["tpot_ms"])
    if "e2e_ms" in limit:
        good &= e2e <= limit["e2e_ms"]
    start = min((r.t_arrival for r in done), default=0)
    end = max((r.t_end for r in done), default=0)
    window_s = max((end - start) / NS, 1e-9)
    tokens = int(counts.sum())
    gpus = int(limits.value("replicas")) * int(limits.gpus.value)
    cost = gpus * window_s / 3600 * gpu_hour_usd / tokens * 1e6 if tokens else None
    warnings = []
    if keep.max_decode > EXTRAPOLATION * model.steps.max_decode:
        warnings.append(
            f"decode batches of up to {keep.max_decode:,} requests, the calibration run's "
            f"only up to {model.steps.max_decode:,}: step times beyond are extrapolated "
            "along the fitted line"
        )
    return Outcome(
        label=label,
        rate_rps=rate_rps,
        settings=limits.settings(),
        seed=seed,
        requests=len(done),
        ttft_ms=Quantiles.of(ttft),
        tpot_ms=Quantiles.of(tpot),
        tbt_ms=Quantiles.of(gaps[keep_gap]),
        slo_attainment=float(good.sum()) / len(done) if done else 0.0,
        goodput_rps=float(good.sum()) / window_s,
        output_tokens_per_s=tokens / window_s,
        cost_per_1m_tokens=cost,
        preemptions=keep.preemptions,
        max_decode_batch=keep.max_decode,
        warnings=tuple(warnings),
    )
