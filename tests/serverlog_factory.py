"""Writes vLLM V0 / V1 server-log lines with known values, in the servers' own formats
(format strings from vllm/engine/metrics.py, vllm/v1/metrics/loggers.py, vllm/logger.py),
for round-trip tests and the benchmark."""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass

UTC = dt.UTC
ANSI_LEVEL = "\x1b[32m{}\x1b[0m"  # ColoredFormatter-style colour around the level


@dataclass(frozen=True)
class Stat:
    """One stats line; percentages are printed with one decimal, as vLLM does."""

    at: dt.datetime
    prompt_tps: float
    gen_tps: float
    running: int
    waiting: int
    kv_pct: float
    prefix_pct: float = 0.0
    swapped: int = 0
    cpu_kv_pct: float = 0.0
    engine: int = 0


def prefix(at: dt.datetime, level: str, file: str, v1: bool, proc: str = "") -> str:
    stamp = at.strftime("%m-%d %H:%M:%S")
    where = f"[{file}]" if v1 else f"{file}]"
    return f"{proc}{level} {stamp} {where}"


def v0_stats(s: Stat) -> str:
    return (
        f"{prefix(s.at, 'INFO', 'metrics.py:349', False)} Avg prompt throughput: "
        f"{s.prompt_tps:.1f} tokens/s, Avg generation throughput: {s.gen_tps:.1f} tokens/s, "
        f"Running: {s.running} reqs, Swapped: {s.swapped} reqs, Pending: {s.waiting} reqs, "
        f"GPU KV cache usage: {s.kv_pct:.1f}%, CPU KV cache usage: {s.cpu_kv_pct:.1f}%."
    )


def v1_stats(s: Stat, proc: str = "(APIServer pid=1) ") -> str:
    return (
        f"{prefix(s.at, 'INFO', 'loggers.py:236', True, proc)} Engine {s.engine:03d}: "
        f"Avg prompt throughput: {s.prompt_tps:.1f} tokens/s, Avg generation throughput: "
        f"{s.gen_tps:.1f} tokens/s, Running: {s.running} reqs, Waiting: {s.waiting} reqs, "
        f"GPU KV cache usage: {s.kv_pct:.1f}%, Prefix cache hit rate: {s.prefix_pct:.1f}%"
    )


def received(at: dt.datetime, req: str, n_prompt: int, max_tokens: int, v1: bool) -> str:
    ids = ", ".join(str(1000 + i) for i in range(n_prompt))
    return (
        f"{prefix(at, 'INFO', 'logger.py:39', v1)} Received request {req}: prompt: "
        f"'SECRET PROMPT TEXT {req}', params: SamplingParams(n=1, temperature=0.7, "
        f"max_tokens={max_tokens}), prompt_token_ids: [{ids}], lora_request: None, "
        "prompt_adapter_request: None."
    )


def lifecycle(at: dt.datetime, what: str, req: str, v1: bool) -> str:
    file = "async_llm.py:252" if v1 else "async_llm_engine.py:207"
    return f"{prefix(at, 'INFO', file, v1)} {what} request {req}."


def access(status: int, path: str = "/v1/completions") -> str:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
    return f'INFO:     127.0.0.1:40000 - "POST {path} HTTP/1.1" {status} {reason}'


def preemption(at: dt.datetime, req: str, n: int) -> str:
    return (
        f"{prefix(at, 'WARNING', 'scheduler.py:1560', False)} Sequence group {req} is preempted "
        "by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can "
        "affect the end-to-end performance. Increase gpu_memory_utilization or "
        f"tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption={n}"
    )


def random_stats(start: dt.datetime, n: int, seed: int, step_s: int = 5) -> list[Stat]:
    """`n` stats with one-decimal values, `step_s` seconds apart."""
    rng = random.Random(seed)
    return [
        Stat(
            at=start + dt.timedelta(seconds=step_s * i),
            prompt_tps=rng.randrange(0, 50000) / 10,
            gen_tps=rng.randrange(0, 30000) / 10,
            running=rng.randrange(0, 256),
            waiting=rng.randrange(0, 64),
            kv_pct=rng.randrange(0, 1001) / 10,
            prefix_pct=rng.randrange(0, 1001) / 10,
            swapped=rng.randrange(0, 4),
            cpu_kv_pct=rng.randrange(0, 1001) / 10,
            engine=rng.randrange(0, 2),
        )
        for i in range(n)
    ]


def hard_wrap(lines: list[str], width: int) -> list[str]:
    """Cut every line into `width`-column pieces, mid-word, as a terminal copy does."""
    out: list[str] = []
    for line in lines:
        out += [line[i : i + width] for i in range(0, max(len(line), 1), width)]
    return out


def colour(line: str) -> str:
    """Wrap the level word of a vLLM line in ANSI colour codes."""
    for level in ("INFO", "WARNING", "ERROR"):
        if line.startswith(level + " "):
            return ANSI_LEVEL.format(level) + line[len(level) :]
    return line


def bench_block(start: dt.datetime, seed: int) -> list[str]:
    """A realistic 100-line V1 block: stats, request lifecycle, access lines, other INFO."""
    stats = random_stats(start, 40, seed, step_s=1)
    out: list[str] = []
    for i, s in enumerate(stats):
        out.append(v1_stats(s))
        if i % 2 == 0:
            req = f"cmpl-{seed:08x}{i:024x}-0"
            out.append(received(s.at, req, 8, 256, True))
            out.append(lifecycle(s.at, "Added", req, True))
            out.append(access(200))
        if i % 8 == 0:
            out.append(f"{prefix(s.at, 'INFO', 'core.py:214', True)} Some other engine message {i}")
    return out[:100] + [""] * (100 - len(out[:100]))
