"""Configuration of a simulated serving run: the engine, the workload and the injected faults.

Every fault knob is off by default; a scenario (`scenarios.py`) is a named combination.
Units are in the field names (`_s` seconds, `_tokens` tokens); ratios are 0–1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# 2025-06-15 10:00:00 UTC: every scenario starts its clock here unless told otherwise.
DEFAULT_START_NS = 1_749_981_600_000_000_000


@dataclass(frozen=True)
class EngineConfig:
    """A vLLM-V1-like engine with continuous batching (seed part 1 §2.2, part 2 §3.2).

    Cost model of one engine step (seconds), each term scaled by the warm-up and throttle
    factors: `step_overhead_s` + `decode_per_seq_s` × decoding seqs + `decode_per_kv_token_s`
    × KV tokens of the batch (bandwidth-bound decode: KV bytes read / HBM bandwidth) +
    `prefill_per_token_s` × prefill tokens (compute-bound: 2 × params FLOPs / peak) +
    `prefill_attn_per_token2_s` × prefill tokens × their context (attention is quadratic).
    Defaults approximate Llama-3.1-8B in bf16 on one H100 80GB.
    """

    model: str = "meta-llama/Llama-3.1-8B-Instruct"
    gpu_name: str = "NVIDIA H100 80GB HBM3"
    tensor_parallel_size: int = 1  # GPUs the engine spans; each logs and is sampled alike
    kv_kib_per_token: float = 128.0  # K and V of all layers, per GPU
    host: str = "gpu-node-0"
    kv_budget_tokens: int = 400_000  # GPU KV cache size: (mem × util − weights) / KV bytes/token
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192  # token budget per step
    max_model_len: int = 32768
    chunked_prefill: bool = True
    prefix_caching: bool = True
    prefix_cache_tokens: int = 200_000  # capacity of the prefix cache (evictable blocks)
    step_overhead_s: float = 0.0055  # weights read once per step: 16 GB / 3.35 TB/s, + launch
    decode_per_seq_s: float = 0.000015
    decode_per_kv_token_s: float = 3.9e-8  # 128 KiB of KV per token / 3.35 TB/s
    prefill_per_token_s: float = 2.7e-5  # 16 GFLOP per token / ~600 TFLOP/s effective
    prefill_attn_per_token2_s: float = 8.7e-13
    tokenize_base_s: float = 0.0003
    tokenize_per_token_s: float = 1.5e-6
    ipc_s: float = 0.0004  # tokenized → in the engine queue (API server → EngineCore)
    startup_lead_s: float = 120.0  # engine ready this long before the first arrival
    warmup_s: float = 0.0  # slow period after "Application startup complete"
    warmup_factor: float = 1.0  # step-cost multiplier at the very start of the warm-up
    weights_gib: float = 14.99
    fb_total_mib: int = 81559
    gpu_memory_utilization: float = 0.9
    tdp_w: float = 700.0
    idle_w: float = 72.0
    sm_clock_mhz: int = 1980


@dataclass(frozen=True)
class WorkloadConfig:
    """Where arrivals and lengths come from: a shipped real trace slice or a distribution."""

    source: str = "azure-conv"  # azure-conv | azure-code | mooncake | parametric
    requests: int = 100
    rate_per_s: float | None = None  # rescale the source to this mean rate (None: as is)
    burstiness: float = 1.0  # parametric: gamma shape = 1/burstiness (1 = Poisson)
    prompt_mean_tokens: float = 900.0  # parametric log-normal
    prompt_sigma: float = 0.8
    output_mean_tokens: float = 120.0
    output_sigma: float = 0.9
    length_scale: float = 1.0  # multiply trace lengths (mooncake prompts are ~7 k tokens)
    max_output_tokens: int | None = None  # cap output lengths (small sample traces)
    shared_prefix_groups: int = 0  # parametric: number of shared system prompts (0: none)
    shared_prefix_tokens: int = 0
    prefix_block_tokens: int = 16


@dataclass(frozen=True)
class FaultConfig:
    """Injected faults, each off by default. Windows are fractions of the arrival span."""

    long_output_fraction: float = 0.0  # long-output tail: share of requests with huge outputs
    long_output_tokens: tuple[int, int] = (2000, 4000)
    client_stall_prob: float = 0.0  # per chunk: client / network stall probability
    client_stall_s: tuple[float, float] = (0.15, 0.6)
    network_delay_s: float = 0.002  # one-way client ↔ server delay (client view only)
    long_prompt_fraction: float = 0.0  # prefill interference: share of very long prompts
    long_prompt_tokens: tuple[int, int] = (8000, 16000)
    overload_factor: float = 1.0  # queue overload: arrival rate × this inside the window
    overload_window: tuple[float, float] = (0.3, 0.7)
    tokenizer_slowdown: float = 1.0  # slow tokenizer: per-token cost × this
    throttle_factor: float = 1.0  # GPU throttling: step cost × this inside the window
    throttle_clock_mhz: int = 1980
    throttle_window: tuple[float, float] = (0.4, 0.8)
    fixed_lengths: tuple[int, int] | None = None  # fixed-length load: (prompt, output)
    fixed_length_spread: float = 0.0  # ± this fraction around fixed_lengths (a range ratio)
    cache_salt_fraction: float = 0.0  # share of requests with a unique cache salt: no prefix hits
    error_fraction: float = 0.0  # requests rejected with HTTP 400 (prompt too long)
    timeout_s: float | None = None  # client timeout: requests still running are aborted
    client_view: bool = False  # also write the client-side spans (client.otlp.jsonl)
    # Windowed variant: every fault confined to [start, end) seconds after the first arrival;
    # the overload and throttling windows become this one (traceq/synth/variants.py).
    window_s: tuple[float, float] | None = None


@dataclass(frozen=True)
class Scenario:
    """A named run: engine + workload + faults, and what a diagnosis should find."""

    name: str
    description: str
    engine: EngineConfig = field(default_factory=EngineConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    faults: FaultConfig = field(default_factory=FaultConfig)
    expected_playbooks: tuple[str, ...] = ()
    log_requests: bool = False  # vLLM request logging (off by default since vLLM 0.10.2)
    start_ns: int = DEFAULT_START_NS
    intensity: str | None = None  # mild / medium / strong (traceq/synth/variants.py)
    hardware: str = "h100-8b"  # the engine profile it runs on (traceq/synth/hardware.py)
