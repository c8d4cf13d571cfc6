"""The highest arrival rate whose replay still meets the SLO at the attainment target, per
seed: a doubling search from the observed rate for a rate that fails, then bisection to
`REL_TOL`. Seed 0 is the trace replay (traceq/whatif/workload.py); the others are resampled
runs, and their spread is the interval. `plan()` turns the max rate of one replica into the
replicas and GPUs a target rate needs (`--target-rate`)."""

from __future__ import annotations

from collections.abc import Callable

from traceq.whatif.limits import Limits
from traceq.whatif.model import Capacity, MaxRate, Outcome
from traceq.whatif.replay import Model, replay

REL_TOL = 0.02
"""Bisection stops when the bracket is this narrow relative to the rate (2 %), well inside the
±15 % the max rate is held to (docs/WHATIF.md)."""

MAX_FACTOR = 256.0
"""The search gives up growing past this multiple of the observed rate and reports a lower
bound: an engine idle at 1/256 of its capacity is not a run to extrapolate from."""

MIN_FACTOR = 1 / 256
"""...and shrinking below this fraction of it (the SLO is not met even at a trickle)."""

SEEDS = (0, 1, 2)
"""Seeds of the max-rate search: the trace replay and two resampled runs."""


def max_rate(
    model: Model,
    limits: Limits,
    slo: dict[str, float | None],
    attainment: float,
    gpu_hour_usd: float,
    seeds: tuple[int, ...] = SEEDS,
) -> MaxRate:
    """The max sustainable rate under `limits` (module docstring)."""
    base = model.workload.rate_rps
    per_seed: dict[int, float] = {}
    capped = False
    for seed in seeds:

        def run(rate: float, seed: int = seed) -> Outcome:
            return replay(model, limits, rate, seed, slo, gpu_hour_usd)

        rate, hit_cap = _search(run, base, attainment)
        per_seed[seed] = rate
        capped = capped or hit_cap
    values = list(per_seed.values())
    return MaxRate(
        rate_rps=per_seed[seeds[0]],
        interval=(min(values), max(values)),
        per_seed=per_seed,
        attainment=attainment,
        settings=limits.settings(),
        capped=capped,
    )


def _search(run: Callable[[float], Outcome], base: float, target: float) -> tuple[float, bool]:
    def meets(rate: float) -> bool:
        return run(rate).slo_attainment >= target

    lo, hi = 0.0, base
    if meets(base):
        lo = base
        hi = base * 2
        while meets(hi):
            lo = hi
            if hi >= base * MAX_FACTOR:
                return hi, True
            hi *= 2
    else:
        hi = base
        lo = base / 2
        while not meets(lo):
            hi = lo
            if lo <= base * MIN_FACTOR:
                return 0.0, False
            lo /= 2
    while (hi - lo) > REL_TOL * hi:
        mid = (lo + hi) / 2
        if meets(mid):
            lo = mid
        else:
            hi = mid
    return lo, False


def plan(
    model: Model,
    limits: Limits,
    target_rps: float,
    slo: dict[str, float | None],
    attainment: float,
    gpu_hour_usd: float,
) -> Capacity:
    """`--target-rate`: the replicas and GPUs `target_rps` needs under `limits`, as a capacity
    planner works it out by hand: one replica is the calibrated instance (its limits and its
    GPUs), its max sustainable rate the search above over every seed; the replay deals a
    fleet's arrivals round robin, so that is the rate each replica must sustain."""
    one = limits.with_settings({"replicas": 1})
    per = max_rate(model, one, slo, attainment, gpu_hour_usd)
    return Capacity(target_rps, per, limits.gpus, gpu_hour_usd)
