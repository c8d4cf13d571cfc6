"""Named scenarios: `healthy` and one per fault. Sizes are small (sample_traces/ stays a few
MB); `traceq synth --requests / --duration` scales any of them, and `large` is the benchmark
dataset (1 M requests, > 50 M output tokens)."""

from __future__ import annotations

from dataclasses import replace

from traceq.synth.config import EngineConfig, FaultConfig, Scenario, WorkloadConfig

BASE_WORKLOAD = WorkloadConfig(
    source="azure-conv", requests=64, rate_per_s=0.8, max_output_tokens=128
)

# A RAG assistant on one deployment: every request repeats the application's system prompt
# (instructions, tool schemas, few-shot examples) and adds its own retrieved passages and
# question. With prefix caching on, ~75 % of prompt tokens are served from the cache (the
# system prompt's blocks); the rest is prefilled.
RAG_WORKLOAD = WorkloadConfig(
    source="parametric",
    requests=64,
    # Uncached, a prompt takes ~0.2 s of an H100 to prefill, so 0.65 req/s keeps prefill at
    # ~13 % of the GPU: no queue to speak of, TTFT is prefill. At 0.8 req/s a Poisson
    # stream's clusters put several such prefills beside one stream's decode often enough
    # to double its TPOT (slow-decode), and on an L4 (43 k-token KV cache, ~5 of these
    # prompts) to fill the KV cache.
    rate_per_s=0.65,
    shared_prefix_groups=1,  # one application, one system prompt
    # 352 blocks of 16: with the ~1.8 k tokens of its own, the median prompt is ~7.3 k tokens,
    # whose uncached prefill (~0.2 s on the reference H100) is ttft-prefill's floor; past
    # 8 k tokens long-prompts (8 k = twice its long_prompt_tokens) would rank as high as the
    # engine config's "prefix caching off"
    shared_prefix_tokens=5632,
    # top-k passages of a fixed chunk size plus the question: little spread (length CV ~0.07
    # over the whole prompt, above unrealistic-load's 0.05)
    prompt_mean_tokens=1800.0,
    prompt_sigma=0.3,
    # answers of a few paragraphs: long enough that one 0.2-s prefill step in a stream does
    # not double its TPOT
    output_mean_tokens=160.0,
    output_sigma=0.4,
    max_output_tokens=384,
)


def _s(name: str, description: str, playbooks: tuple[str, ...] = (), **kw: object) -> Scenario:
    kw.setdefault("workload", BASE_WORKLOAD)
    return Scenario(name=name, description=description, expected_playbooks=playbooks, **kw)  # type: ignore[arg-type]


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        _s(
            "healthy",
            "Azure conv trace replayed at 0.8 req/s on a warmed-up engine; no fault. vLLM "
            "request logging on (Received / Added lines).",
            log_requests=True,
        ),
        _s(
            "long-output-tail",
            "4 % of requests generate 2–3.5 k tokens: p99 e2e far above p50.",
            ("long-request-tail",),
            faults=FaultConfig(long_output_fraction=0.04, long_output_tokens=(2000, 3500)),
        ),
        _s(
            "client-jitter",
            "Network / client stalls (3 % of chunks held 150–600 ms) seen only in the client view.",
            ("tbt-jitter",),
            faults=FaultConfig(client_stall_prob=0.03, client_view=True),
        ),
        _s(
            "prefill-interference",
            "12 % of prompts are 8–16 k tokens and chunked prefill is off: decodes stall "
            "behind whole prefills.",
            ("prefill-interference",),
            engine=EngineConfig(chunked_prefill=False, max_num_batched_tokens=32768),
            faults=FaultConfig(long_prompt_fraction=0.12),
            workload=replace(BASE_WORKLOAD, rate_per_s=2.0),
        ),
        _s(
            "kv-pressure",
            "KV cache of 5 k tokens with max_num_seqs=256: preemption (recompute) storm.",
            ("kv-pressure",),
            engine=EngineConfig(kv_budget_tokens=5_000, gpu_memory_utilization=0.3),
            workload=replace(BASE_WORKLOAD, rate_per_s=1.6),
        ),
        _s(
            "queue-overload",
            "Arrivals 15× faster in the middle third, max_num_seqs=4: requests queue.",
            ("ttft-queueing",),
            engine=EngineConfig(max_num_seqs=4),
            faults=FaultConfig(overload_factor=15.0, overload_window=(0.35, 0.65)),
            workload=replace(BASE_WORKLOAD, requests=84),
        ),
        _s(
            "slow-tokenizer",
            "Tokenization 100× slower (150 µs per prompt token, one worker): TTFT is "
            "mostly tokenization.",
            ("tokenizer-overhead",),
            faults=FaultConfig(tokenizer_slowdown=100.0),
        ),
        _s(
            "warm-up-skew",
            "Traffic starts 1 s after startup; steps 5× slower at first, back to normal "
            "after 60 s.",
            ("warm-up-skew",),
            engine=EngineConfig(startup_lead_s=1.0, warmup_s=60.0, warmup_factor=5.0),
        ),
        _s(
            "gpu-throttle",
            "SM clock drops to 1095 MHz (steps 1.8× slower) for 40 % of the run.",
            ("slow-decode",),
            faults=FaultConfig(throttle_factor=1.8, throttle_clock_mhz=1095),
        ),
        _s(
            "fixed-length",
            "Every prompt 1024 tokens, every output 128 (ignore_eos): an unrealistic load test.",
            ("unrealistic-load",),
            faults=FaultConfig(fixed_lengths=(1024, 128)),
        ),
        _s(
            "errors",
            "5 % of requests rejected (prompt too long, HTTP 400); an overload with "
            "max_num_seqs=4 makes others time out after 1.5 s. Request logging on.",
            ("error-rate",),
            log_requests=True,
            engine=EngineConfig(max_num_seqs=4),
            faults=FaultConfig(
                error_fraction=0.05, timeout_s=1.5, overload_factor=20.0, overload_window=(0.4, 0.8)
            ),
        ),
        _s(
            "low-prefix-reuse",
            "RAG assistant traffic at 0.65 req/s: every prompt repeats a 5.6 k-token system "
            "prompt (~75 % of prompt tokens hit the prefix cache when it is on) before ~1.8 k "
            "tokens of its own; prefix caching off: every prompt is prefilled in full.",
            ("ttft-prefill",),
            engine=EngineConfig(prefix_caching=False),
            workload=RAG_WORKLOAD,
        ),
        _s(
            "large",
            "Benchmark dataset: 1 M requests, > 50 M output tokens, Poisson arrivals at 70 % "
            "of capacity, log-normal lengths; request logging off.",
            workload=WorkloadConfig(
                source="parametric",
                requests=1_000_000,
                rate_per_s=30.0,
                prompt_mean_tokens=600.0,
                output_mean_tokens=56.0,
                output_sigma=0.7,
                shared_prefix_groups=8,
                shared_prefix_tokens=256,
            ),
            log_requests=False,
        ),
    )
}

# The scenarios committed under sample_traces/ (everything but the benchmark dataset).
SAMPLE_SCENARIOS = tuple(name for name in SCENARIOS if name != "large")
