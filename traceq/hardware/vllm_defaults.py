"""vLLM's scheduler defaults by GPU, for its OpenAI API server from 0.9 on
(vllm/engine/arg_utils.py, `_set_default_args_v1` / `get_batch_defaults`): a GPU of at least
70 GiB other than an A100 gets the larger ones. The what-if replay takes a limit the log does
not print from here (traceq/whatif/limits.py), the playbooks' step-scaled floors the step
budget chunked prefill would have (traceq/playbooks/gpu.py), and the synth's fit the same
(traceq/synth/fit.py).

>>> defaults(79.6, "NVIDIA H100 80GB HBM3")["max_num_batched_tokens"]
8192
>>> big_gpu(80, "NVIDIA A100-SXM4-80GB"), big_gpu(22.5, "NVIDIA L4")
(False, False)
"""

from __future__ import annotations

BIG_GPU_GIB = 70
"""GPU memory (GiB) from which vLLM picks the larger defaults (A100s excepted)."""

BIG_DEFAULTS = {"max_num_seqs": 1024, "max_num_batched_tokens": 8192}
"""vLLM's OpenAI-server defaults on a ≥ 70 GiB GPU other than an A100."""

SMALL_DEFAULTS = {"max_num_seqs": 256, "max_num_batched_tokens": 2048}
"""vLLM's OpenAI-server defaults on other GPUs."""


def big_gpu(memory_gib: float, name: str | None) -> bool:
    """Whether vLLM gives a GPU of `memory_gib` named `name` its larger defaults."""
    return memory_gib >= BIG_GPU_GIB and "a100" not in (name or "").lower()


def defaults(memory_gib: float, name: str | None) -> dict[str, int]:
    """vLLM's scheduler defaults (`max_num_seqs`, `max_num_batched_tokens`) on that GPU."""
    return BIG_DEFAULTS if big_gpu(memory_gib, name) else SMALL_DEFAULTS
