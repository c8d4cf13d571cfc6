"""The calibrated workload: the run's own requests (arrival, prompt, output, prefix-cached
tokens; traceq/sql/whatif_requests.sql), its arrival rate and burstiness, and the arrivals a
replay feeds the engine at another rate.

Requests a client aborted at one common time after arrival (a client timeout: at least
`TIMEOUT_MIN_ABORTS` aborts, most within `TIMEOUT_SPREAD` of their median) are replayed too,
with that timeout: they held queue and batch slots until the client left, and at another
rate more or fewer of them time out. Their output length, cut short by the abort, is drawn
from the completed requests' at least as long. Aborts without such a common time are left
out (nothing says when their clients would leave at another rate).

Seed 0 replays the observed requests in their order with the gaps between arrivals scaled to
the new rate (a trace replay: the bursts and the joint lengths are the run's own). Any other
seed draws a new run of the same size: gamma-distributed gaps with the observed burstiness
and (prompt, output, cached) triples drawn with replacement from the observed ones.

>>> import numpy as np
>>> w = Workload(np.array([0, 10**9, 3 * 10**9]), np.array([100, 200, 300]),
...              np.array([10, 20, 30]), np.array([0, 0, 16]), 3)
>>> round(w.rate_rps, 2), [a.t_arrival for a in w.arrivals(2 * w.rate_rps, 0)]
(0.67, [0, 500000000, 1500000000])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from traceq.synth.arrivals import Arrival

NS = 1_000_000_000

MAX_REPLAY_REQUESTS = 10_000
"""Requests a replay feeds the engine at most (the first ones of a longer run): the p99 of
10,000 requests is stable to a few percent, and one replay stays a few seconds of CPU."""

TIMEOUT_MIN_ABORTS = 3
"""Aborted requests needed before their common duration is read as a client timeout."""

TIMEOUT_SPREAD = 0.10
"""How close to their median (relative) the aborts' 10th and 90th percentile durations must
lie to be one client timeout: a timeout ends every request it hits within a step or two of
the same time, while users who cancel leave at any time."""

BLOCK_TOKENS = 16
"""Prefix-cache block size of the replay (vLLM's default block size): a request's cached
tokens are rounded down to whole blocks."""


@dataclass(frozen=True)
class Workload:
    """The requests to replay, as arrays (ns, tokens), the run's total request count, and the
    client timeout (ns, 0: none) with the number of replayed requests it ended."""

    t_arrival: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    cached: np.ndarray
    total_requests: int
    timeout_ns: int = 0
    timed_out: int = 0

    @classmethod
    def from_frame(cls, df: pl.DataFrame, total: int, aborts: int = 0) -> Workload:
        """From traceq/sql/whatif_requests.sql's rows, of a run of `total` completed requests
        and `aborts` aborted ones (module docstring: which aborts are replayed)."""
        aborted = df["aborted"].to_numpy().astype(bool) if "aborted" in df.columns else None
        output = df["output"].to_numpy().astype(np.int64)
        timeout = 0
        if aborted is not None and aborted.any():
            timeout = client_timeout_ns(df["e2e_ns"].to_numpy()[aborted].astype(np.int64))
            done = np.sort(output[~aborted])
            if timeout and len(done):
                output = output.copy()
                output[aborted] = _longer(done, output[aborted])
            else:
                df, output, aborted = df.filter(~df["aborted"]), output[~aborted], None
        return cls(
            df["t_arrival"].to_numpy().astype(np.int64),
            df["prompt"].to_numpy().astype(np.int64),
            output,
            df["cached"].to_numpy().astype(np.int64).clip(0),
            total + (aborts if timeout else 0),
            timeout,
            int(aborted.sum()) if aborted is not None else 0,
        )

    @property
    def n(self) -> int:
        return len(self.t_arrival)

    @property
    def span_s(self) -> float:
        return float(self.t_arrival[-1] - self.t_arrival[0]) / NS if self.n > 1 else 0.0

    @property
    def rate_rps(self) -> float:
        """Mean arrival rate: requests after the first over the arrival span."""
        return (self.n - 1) / self.span_s if self.span_s > 0 else 0.0

    @property
    def burstiness(self) -> float:
        """Squared coefficient of variation of the gaps between arrivals (1: Poisson)."""
        gaps = np.diff(self.t_arrival).astype(float)
        mean = gaps.mean() if len(gaps) else 0.0
        return float(gaps.var() / mean**2) if mean > 0 else 1.0

    @property
    def prefix_hit_rate(self) -> float:
        total = float(self.prompt.sum())
        return float(self.cached.sum()) / total if total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.total_requests,
            "replayed_requests": self.n,
            "rate_rps": self.rate_rps,
            "burstiness": self.burstiness,
            "prompt_tokens": _spread(self.prompt),
            "output_tokens": _spread(self.output),
            "prompt_output_correlation": _corr(self.prompt, self.output),
            "prefix_hit_rate": self.prefix_hit_rate,
            "client_timeout_s": self.timeout_ns / NS if self.timeout_ns else None,
            "timed_out_requests": self.timed_out,
        }

    def arrivals(self, rate_rps: float, seed: int) -> list[Arrival]:
        """The requests of one replay at `rate_rps`, in arrival order (module docstring)."""
        t0 = int(self.t_arrival[0])
        if seed == 0:
            scale = self.rate_rps / rate_rps if rate_rps > 0 and self.rate_rps > 0 else 1.0
            times = t0 + np.round((self.t_arrival - t0) * scale).astype(np.int64)
            pick = np.arange(self.n)
        else:
            rng = np.random.default_rng(seed)
            shape = 1.0 / max(self.burstiness, 1e-3)
            gaps = rng.gamma(shape, 1.0 / (rate_rps * shape), self.n - 1) * NS
            times = t0 + np.concatenate([[0], np.cumsum(np.round(gaps))]).astype(np.int64)
            pick = rng.integers(0, self.n, self.n)
        blocks = self.cached[pick] // BLOCK_TOKENS
        return [
            Arrival(i, int(t), int(p), int(o), int(o), tuple(range(b)), BLOCK_TOKENS)
            for i, (t, p, o, b) in enumerate(
                zip(times, self.prompt[pick], self.output[pick], blocks, strict=True)
            )
        ]

    def warm_blocks(self) -> tuple[int, ...]:
        """The prefix blocks a warm cache holds at the start of a replay: the run's hits
        happened against a cache that was already warm."""
        return tuple(range(int(self.cached.max() // BLOCK_TOKENS) if self.n else 0))


def client_timeout_ns(durations: np.ndarray) -> int:
    """The client timeout that aborted requests lasting `durations` (ns) share, or 0.

    >>> client_timeout_ns(np.array([1_500, 1_502, 1_505, 1_510, 1_540]) * 10**6) / 1e6
    1500.8
    >>> client_timeout_ns(np.array([200, 900, 1_500, 4_000]) * 10**6)
    0
    """
    if len(durations) < TIMEOUT_MIN_ABORTS:
        return 0
    p10, p50, p90 = np.quantile(durations.astype(float), [0.1, 0.5, 0.9])
    if p10 < (1 - TIMEOUT_SPREAD) * p50 or p90 > (1 + TIMEOUT_SPREAD) * p50:
        return 0
    return round(float(p10))


def _longer(done: np.ndarray, cut: np.ndarray) -> np.ndarray:
    """For each aborted request's `cut` output, one completed output (`done`, sorted) at least
    as long, drawn evenly and the same on every call; the cut length where none is."""
    rng = np.random.default_rng(0)
    lo = np.searchsorted(done, cut, side="left")
    pick = lo + np.floor(rng.random(len(cut)) * (len(done) - lo)).astype(np.int64)
    return np.where(lo < len(done), done[np.minimum(pick, len(done) - 1)], cut)


def _spread(a: np.ndarray) -> dict[str, float]:
    q = [float(x) for x in np.quantile(a, [0.5, 0.9, 0.99])] if len(a) else [0.0, 0.0, 0.0]
    return {"mean": float(a.mean()) if len(a) else 0.0, "p50": q[0], "p90": q[1], "p99": q[2]}


def _corr(a: np.ndarray, b: np.ndarray) -> float | None:
    if len(a) < 3 or a.std() == 0 or b.std() == 0:
        return None
    return float(np.corrcoef(np.log(a), np.log(b))[0, 1])
