"""Hardware profiles: the same scenarios on other GPUs and model sizes.

A profile replaces the engine fields a scenario leaves at their defaults (a fault's own
settings, such as kv-pressure's 5 k-token cache, stay) and scales the arrival rate by the
profile's capacity against the default engine (Llama-3.1-8B on one H100 SXM): the smaller of
its prefill and decode speed against the default's, so a run is as loaded on an L4 as on an
H100 whether its prompts or its outputs dominate. Step costs follow the GPU's spec
(traceq/hardware/gpus.csv): weights and KV bytes over memory bandwidth for decode, 2 FLOPs per
parameter per token at ~60 % of dense bf16 peak for prefill, per GPU when tensor-parallel.

A fault knob whose effect is relative to the GPU's speed scales with it (`SPEED_RELATIVE`): a
tokenizer slowdown is CPU time added to a TTFT that a slower GPU lengthens, so it is scaled by
the profile's prefill time per token over the default's, and tokenization keeps its share of
TTFT (docs/SYNTH.md, Intensity).

>>> from traceq.synth.scenarios import SCENARIOS
>>> sc = on_hardware(SCENARIOS["kv-pressure"], "l4-8b")
>>> sc.engine.gpu_name, sc.engine.kv_budget_tokens, round(sc.workload.rate_per_s, 2)
('NVIDIA L4', 5000, 0.14)
>>> on_hardware(SCENARIOS["slow-tokenizer"], "l4-8b").faults.tokenizer_slowdown
821.3
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace

from traceq.synth.config import EngineConfig, Scenario


@dataclass(frozen=True)
class Profile:
    """An engine on a GPU, and its capacity relative to the default engine's."""

    name: str
    description: str
    engine: EngineConfig
    capacity: float


_GIB = 1 << 30
PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("h100-8b", "Llama-3.1-8B bf16 on one H100 SXM (the default)", EngineConfig(), 1.0),
        Profile(
            "a100-8b",
            "Llama-3.1-8B bf16 on one A100 SXM4 80GB (2,039 GB/s, 312 TFLOP/s bf16)",
            EngineConfig(
                gpu_name="NVIDIA A100-SXM4-80GB",
                fb_total_mib=81920,
                step_overhead_s=16.1e9 / 2.039e12 + 0.0007,
                decode_per_kv_token_s=131072 / 2.039e12,
                decode_per_seq_s=0.00002,
                prefill_per_token_s=16.1e9 / (312e12 * 0.6),
                prefill_attn_per_token2_s=2.8e-12,
                tdp_w=400.0,
                idle_w=55.0,
                sm_clock_mhz=1410,
            ),
            0.3,
        ),
        Profile(
            "l4-8b",
            "Llama-3.1-8B bf16 on one L4 24GB (300 GB/s, 121 TFLOP/s bf16): a 43 k-token "
            "cache and the 2,048-token step budget vLLM sets below 70 GiB",
            EngineConfig(
                gpu_name="NVIDIA L4",
                fb_total_mib=23034,
                gpu_memory_utilization=0.95,
                kv_budget_tokens=43_000,
                max_model_len=16384,
                max_num_seqs=256,
                max_num_batched_tokens=2048,
                prefix_cache_tokens=20_000,
                step_overhead_s=16.1e9 / 300e9 + 0.001,
                decode_per_kv_token_s=131072 / 300e9,
                decode_per_seq_s=0.00004,
                prefill_per_token_s=16.1e9 / (121e12 * 0.6),
                prefill_attn_per_token2_s=7.0e-12,
                tdp_w=72.0,
                idle_w=16.0,
                sm_clock_mhz=2040,
            ),
            0.09,
        ),
        Profile(
            "h100x4-70b",
            "Llama-3.1-70B bf16 on four H100 SXM, tensor-parallel 4 (32.9 GiB of weights each)",
            EngineConfig(
                model="meta-llama/Llama-3.1-70B-Instruct",
                tensor_parallel_size=4,
                weights_gib=141.2e9 / 4 / _GIB,
                kv_kib_per_token=80.0,
                kv_budget_tokens=450_000,
                step_overhead_s=141.2e9 / 4 / 3.35e12 + 0.002,
                decode_per_kv_token_s=81920 / 3.35e12,
                decode_per_seq_s=0.00002,
                prefill_per_token_s=141.2e9 / 4 / (989e12 * 0.6) + 0.000005,
                prefill_attn_per_token2_s=1.1e-12,
            ),
            0.4,
        ),
    )
}
DEFAULT = "h100-8b"
_DEFAULTS = EngineConfig()


def prefill_ratio(engine: EngineConfig) -> float:
    """How much longer a prompt token takes to prefill on `engine` than on the default."""
    return engine.prefill_per_token_s / _DEFAULTS.prefill_per_token_s


SPEED_RELATIVE: dict[str, Callable[[EngineConfig], float]] = {
    "faults.tokenizer_slowdown": prefill_ratio,
}
"""Fault knobs given for the default engine and scaled on a profile by the ratio named (a
knob at its off value, 1, stays off): a slowdown of the tokenizer that takes ~45 % of an H100's
TTFT at 18× takes 12–15 % of an L4's, under tokenizer-overhead's 30 % floor, unless it grows
with the L4's 8.2× longer prefills."""


def on_hardware(sc: Scenario, profile: str) -> Scenario:
    """`sc` on `profile`'s engine: the fields the scenario set itself are kept, the rest
    come from the profile; the arrival rate scales with the profile's capacity. A scenario
    already on `profile` is returned as it is (its rate scaled once)."""
    p = PROFILES[profile]
    if p.name == sc.hardware:
        return sc
    if sc.hardware != DEFAULT:
        msg = f"scenario {sc.name!r} is already on {sc.hardware!r}, not the default engine"
        raise ValueError(msg)
    own = {
        f.name: getattr(sc.engine, f.name)
        for f in fields(EngineConfig)
        if getattr(sc.engine, f.name) != getattr(_DEFAULTS, f.name)
    }
    engine = replace(p.engine, **own)
    rate = sc.workload.rate_per_s
    workload = replace(sc.workload, rate_per_s=rate * p.capacity if rate else rate)
    faults = sc.faults
    for path, ratio in SPEED_RELATIVE.items():
        name = path.split(".")[1]
        value = getattr(faults, name)
        if value != 1.0:
            faults = replace(faults, **{name: round(value * ratio(engine), 1)})
    return replace(sc, engine=engine, workload=workload, faults=faults, hardware=profile)
