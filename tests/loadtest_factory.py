"""Build `vllm bench serve` result objects the way `vllm/benchmarks/serve.py` does
(`calculate_metrics` + `main`: numpy statistics in ms, per-request arrays index-aligned over
every request, failures included). No real result JSON is at hand, so these follow the
source's key layout."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Req:
    start: float  # perf_counter seconds
    ttft: float = 0.0
    itls: list[float] = field(default_factory=list)
    output_len: int = 0
    input_len: int = 100
    error: str = ""

    @property
    def latency(self) -> float:
        return self.ttft + sum(self.itls) if not self.error else 0.0


def vllm_result(requests: list[Req], *, detailed: bool = True, percentiles=(50, 90, 99)) -> dict:
    ok = [r for r in requests if not r.error]
    ttfts = [r.ttft for r in ok]
    tpots = [(r.latency - r.ttft) / (r.output_len - 1) for r in ok if r.output_len > 1]
    itls = [g for r in ok for g in r.itls]
    e2els = [r.latency for r in ok]
    starts = [r.start for r in requests]
    duration = max(r.start + r.latency for r in requests) - min(starts)
    out: dict = {
        "date": "20261130-044200",
        "backend": "vllm",
        "label": None,
        "model_id": "meta-llama/Llama-3.1-8B-Instruct",
        "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct",
        "num_prompts": len(requests),
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": None,
        "duration": duration,
        "completed": len(ok),
        "failed": len(requests) - len(ok),
        "total_input_tokens": sum(r.input_len for r in ok),
        "total_output_tokens": sum(r.output_len for r in ok),
        "request_throughput": len(ok) / duration,
        "request_goodput": None,
        "output_throughput": sum(r.output_len for r in ok) / duration,
        "total_token_throughput": sum(r.output_len + r.input_len for r in ok) / duration,
        "input_lens": [r.input_len for r in requests],
        "output_lens": [r.output_len for r in requests],
        "ttfts": [r.ttft for r in requests],
        "itls": [r.itls for r in requests],
        "start_times": starts,
        "latencies": [r.latency for r in requests],
        "errors": [r.error for r in requests],
        "generated_texts": ["lorem ipsum " * 8 if not r.error else "" for r in requests],
        "max_output_tokens_per_s": 1234.0,
        "max_concurrent_requests": len(requests),
    }
    for name, values in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els)):
        x = np.asarray(values or [0.0])
        out[f"mean_{name}_ms"] = float(np.mean(x) * 1000)
        out[f"median_{name}_ms"] = float(np.median(x) * 1000)
        out[f"std_{name}_ms"] = float(np.std(x) * 1000)
        for p in percentiles:
            word = str(int(p)) if int(p) == p else str(p)
            out[f"p{word}_{name}_ms"] = float(np.percentile(x, p) * 1000)
    if not detailed:
        for key in ("input_lens", "output_lens", "ttfts", "itls", "errors", "generated_texts"):
            out.pop(key)
        out.pop("start_times")
        out.pop("latencies")
    return out


def workload(seed: int = 7, n: int = 12, t0: float = 5021.25) -> list[Req]:
    """n requests on a perf_counter clock; one failure; one request with two-token chunks."""
    rng = np.random.default_rng(seed)
    reqs = []
    for i in range(n):
        out = int(rng.integers(2, 40))
        gaps = [float(g) for g in rng.uniform(0.012, 0.030, out - 1)]
        reqs.append(
            Req(
                start=t0 + 0.05 * i,
                ttft=float(rng.uniform(0.05, 0.4)),
                itls=gaps,
                output_len=out,
                input_len=int(rng.integers(50, 500)),
            )
        )
    reqs[3] = Req(start=reqs[3].start, error="ClientConnectorError: connection refused")
    multi = reqs[5]
    multi.output_len = 2 * len(multi.itls) + 2  # two tokens per streamed chunk
    return reqs
