"""Request arrivals and lengths: replayed from the shipped real-trace slices or drawn from
distributions, with the length / rate faults applied. Yields requests in arrival order.

Real slices (traceq/synth/data, provenance in data/PROVENANCE.md): the Azure LLM inference
trace 2023 (conv, code) and the Mooncake FAST'25 conversation trace (with its 512-token
prefix block hashes, which drive prefix-cache hits).
"""

from __future__ import annotations

import math
import random
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from importlib import resources

import orjson

from traceq.synth.config import FaultConfig, WorkloadConfig

MOONCAKE_BLOCK_TOKENS = 512


@dataclass(slots=True)
class Arrival:
    idx: int
    t_arrival: int  # ns
    prompt_tokens: int
    output_tokens: int  # tokens the model will generate if not stopped
    max_tokens: int
    blocks: tuple[int, ...]  # prefix-cache block hashes of the prompt
    block_tokens: int
    rejected: bool = False  # HTTP 400 before reaching the engine


def rng(seed: int, purpose: str) -> random.Random:
    """An independent, platform-stable random stream per purpose (str seeds hash with SHA-512)."""
    return random.Random(f"traceq-synth:{seed}:{purpose}")


def _data(name: str) -> bytes:
    return resources.files("traceq.synth").joinpath("data", name).read_bytes()


def _azure(name: str) -> list[tuple[float, int, int, tuple[int, ...]]]:
    lines = _data(name).decode().splitlines()[1:]
    rows = []
    for line in lines:
        ts, ctx, gen = line.split(",")
        # 7 fractional digits (100 ns ticks): keep microseconds.
        t = datetime.fromisoformat(ts[:26]).timestamp()
        rows.append((t, int(ctx), int(gen), ()))
    return rows  # type: ignore[return-value]


def _mooncake(name: str) -> list[tuple[float, int, int, tuple[int, ...]]]:
    rows = []
    for line in _data(name).splitlines():
        d = orjson.loads(line)
        rows.append(
            (d["timestamp"] / 1e3, d["input_length"], d["output_length"], tuple(d["hash_ids"]))
        )
    return rows


_SOURCES = {
    "azure-conv": ("azure_conv_2023_first2000.csv", _azure),
    "azure-code": ("azure_code_2023_first1000.csv", _azure),
    "mooncake": ("mooncake_conversation_first1000.jsonl", _mooncake),
}


def _lognormal(r: random.Random, mean: float, sigma: float) -> int:
    return max(1, round(r.lognormvariate(math.log(mean) - sigma * sigma / 2, sigma)))


def _trace_rows(
    w: WorkloadConfig, seed: int
) -> Iterator[tuple[float, int, int, tuple[int, ...], int]]:
    """(gap s, prompt, output, blocks, block tokens) replayed cyclically from a random offset."""
    name, reader = _SOURCES[w.source]
    rows = reader(name)
    n = len(rows)
    gaps = [max(0.0, rows[(i + 1) % n][0] - rows[i][0]) for i in range(n - 1)]
    gaps.append(sum(gaps) / len(gaps))  # the wrap-around gap
    mean_gap = sum(gaps) / n
    scale = 1.0 if w.rate_per_s is None else 1.0 / (w.rate_per_s * mean_gap)
    block = max(1, round(MOONCAKE_BLOCK_TOKENS * w.length_scale))
    i = rng(seed, "offset").randrange(n)
    lap = 0
    while True:
        _, ctx, gen, blocks = rows[i]
        # A later lap gets fresh block hashes: the same prompt is not cached forever.
        blocks = tuple(b + lap * 10_000_000 for b in blocks)
        prompt = max(1, round(ctx * w.length_scale))
        yield gaps[i] * scale, prompt, max(1, round(gen * w.length_scale)), blocks, block
        i += 1
        if i == n:
            i, lap = 0, lap + 1


def _parametric_rows(
    w: WorkloadConfig, seed: int
) -> Iterator[tuple[float, int, int, tuple[int, ...], int]]:
    r = rng(seed, "parametric")
    rate = w.rate_per_s or 1.0
    shape = 1.0 / w.burstiness
    block = w.prefix_block_tokens
    unique = 1_000_000_000
    while True:
        gap = r.gammavariate(shape, 1.0 / (rate * shape))
        own = _lognormal(r, w.prompt_mean_tokens, w.prompt_sigma)
        out = _lognormal(r, w.output_mean_tokens, w.output_sigma)
        blocks: tuple[int, ...] = ()
        prompt = own
        if w.shared_prefix_groups:
            # Zipf-like popularity of the shared system prompts.
            g = min(int(r.paretovariate(1.2)) - 1, w.shared_prefix_groups - 1)
            n_prefix = w.shared_prefix_tokens // block
            blocks = tuple(g * 100_000 + j for j in range(n_prefix))
            prompt = own + w.shared_prefix_tokens
        n_own = own // block
        blocks += tuple(range(unique, unique + n_own))
        unique += n_own
        yield gap, prompt, out, blocks, block


def _warp(gaps: array, window: tuple[float, float], factor: float) -> tuple[float, float]:
    """Queue overload: inside the window (fractions of the span) arrivals come `factor` × faster.

    Returns the overload window in seconds after the first arrival, on the warped clock: the
    compressed window is (hi - lo) / factor of the original span long.
    """
    span = sum(gaps)
    lo, hi = window[0] * span, window[1] * span
    t = real = 0.0
    first = last = None
    for i, g in enumerate(gaps):
        if lo <= t < hi:
            gaps[i] = g / factor
            first = real if first is None else first
            last = real + gaps[i]
        t += g
        real += gaps[i]
    return (first, last) if first is not None and last is not None else (0.0, 0.0)


def _warp_window(
    gaps: array, rows: Iterator[tuple], window: tuple[float, float], factor: float
) -> tuple[float, float]:
    """Windowed overload: arrivals `factor` × faster between `window` seconds after the first
    arrival, and as many more requests read from the source as keep the run as long as the
    unwarped one (so the traffic after the window keeps its length)."""
    lo, hi = window
    span = sum(gaps[:-1])
    real = 0.0
    i = 0
    while True:
        if lo <= real < hi:
            gaps[i] /= factor
        real += gaps[i]
        i += 1
        if i == len(gaps):
            if real >= span:
                break
            gaps.append(next(rows)[0])
    return lo, hi


def arrivals(
    w: WorkloadConfig, f: FaultConfig, seed: int, start_ns: int
) -> tuple[int, tuple[int, int] | None, Iterator[Arrival]]:
    """(arrival span in ns, the overload window in ns since the epoch or None, the requests in
    arrival order with faults applied).

    Streaming: only the inter-arrival gaps (8 bytes a request) are held in memory.
    """
    rows = _parametric_rows(w, seed) if w.source == "parametric" else _trace_rows(w, seed)
    gaps = array("d")
    for _ in range(w.requests):
        gaps.append(next(rows)[0])
    overload = None
    if f.overload_factor != 1.0:
        if f.window_s is None:
            lo, hi = _warp(gaps, f.overload_window, f.overload_factor)
        else:
            lo, hi = _warp_window(gaps, rows, f.window_s, f.overload_factor)
        overload = (start_ns + int(lo * 1e9), start_ns + int(hi * 1e9))
    span = int(sum(gaps[:-1]) * 1e9) if len(gaps) > 1 else 0
    return span, overload, _stream(w, f, seed, start_ns, gaps)


class _Picker:
    """Which requests get a per-request fault. Whole-run: an independent draw per request
    (the stream the committed samples were made with). Windowed: a quota, so a short window
    holds round(fraction × its requests) faulty ones rather than possibly none."""

    def __init__(self, r: random.Random, windowed: bool) -> None:
        self.r = r
        self.windowed = windowed
        self.seen: dict[str, int] = {}
        self.phase: dict[str, float] = {}

    def __call__(self, name: str, p: float) -> bool:
        if not p:
            return False
        if not self.windowed:
            return self.r.random() < p
        if name not in self.phase:
            self.phase[name] = self.r.random()
        k = self.seen.get(name, 0)
        self.seen[name] = k + 1
        ph = self.phase[name]
        return math.floor((k + 1) * p + ph) > math.floor(k * p + ph)


def _stream(
    w: WorkloadConfig, f: FaultConfig, seed: int, start_ns: int, gaps: array
) -> Iterator[Arrival]:
    # Second pass over the same deterministic stream: only the gaps were held in memory.
    rows = _parametric_rows(w, seed) if w.source == "parametric" else _trace_rows(w, seed)
    fault_r = rng(seed, "faults")
    pick = _Picker(fault_r, f.window_s is not None)
    lo, hi = (start_ns + s * 1e9 for s in f.window_s) if f.window_s else (-math.inf, math.inf)
    salt = 0
    t = float(start_ns)
    for k in range(len(gaps)):  # a windowed overload reads more than w.requests
        _, prompt, out, blocks, block = next(rows)
        if w.max_output_tokens:  # caps the workload's own lengths, not the injected tail
            out = min(out, w.max_output_tokens)
        if not lo <= t < hi:  # windowed variant: outside the window the traffic is healthy
            yield Arrival(k, int(t), prompt, out, max(out, 2048), blocks, block, False)
            t += gaps[k] * 1e9
            continue
        if f.fixed_lengths:
            prompt, out = f.fixed_lengths
            blocks = ()
            if f.fixed_length_spread:
                s = f.fixed_length_spread
                prompt = max(1, round(prompt * fault_r.uniform(1 - s, 1 + s)))
                out = max(1, round(out * fault_r.uniform(1 - s, 1 + s)))
        if pick("long-prompt", f.long_prompt_fraction):
            prompt = fault_r.randint(*f.long_prompt_tokens)
            blocks = ()
        if pick("long-output", f.long_output_fraction):
            out = fault_r.randint(*f.long_output_tokens)
        if pick("salt", f.cache_salt_fraction):  # a unique salt: no block matches the cache
            salt += 1
            blocks = tuple(b + salt * 1_000_000_000_000 for b in blocks)
        rejected = pick("rejected", f.error_fraction)
        max_tokens = out if f.fixed_lengths else max(out, 2048)
        yield Arrival(k, int(t), prompt, out, max_tokens, blocks, block, rejected)
        t += gaps[k] * 1e9
