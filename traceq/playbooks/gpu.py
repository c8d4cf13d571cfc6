"""The GPU a run was measured on, and the parameters that follow it.

A parameter declares what it takes from the GPU with `gpu:` in its YAML:

- a spec figure (`hbm_gb_per_s`, `tflops_bf16`, `tflops_fp8`, `memory_gib`): the measured
  GPU's, from traceq/hardware/gpus.csv (slow-decode's roofline);
- `prefill_time`: a duration on the reference engine (`REFERENCE`: Llama-3.1-8B in bf16 on
  one H100 SXM), scaled by how much longer the same prompt tokens take here: the weights one
  GPU holds over the reference's, times the reference's bf16 peak over this GPU's;
- `step_time`: scaled by how much longer a step of the prefill budget takes here (its
  tokens at the bf16 peak plus one read of the weights at the memory bandwidth): how long
  the steps a chunked-prefill engine takes by design last here. The budget is the printed
  max_num_batched_tokens when it is smaller than the reference's 8,192 (a larger budget is a
  choice whose stalls are worth a finding). Where the start-up lines print chunked prefill
  off (whole prompts in one step: the stalls are the finding, and turning it on is the
  fix), or print no budget (traces without the log, a log without its start-up), it is
  vLLM's default with chunked prefill for this GPU (`default_budget`); an SGLang run
  (its scheduler lines in the data) keeps the reference's 8,192, SGLang's own chunk.

Scaled floors never go below their reference value (a faster GPU keeps the floor a person
notices). The GPU is the one named with `--gpu` (`Options.gpu`), else the model name most
GPU samples carry (nvidia-smi `name`, DCGM `modelName`); the weights and budget come from
the engine's start-up lines. A `--param` override wins over all of it. When the data names
no GPU, or one the table lacks, and none is named, the defaults stand, the finding says which
GPU it assumed, and a finding that used a spec figure cannot fail (`cap`): a roofline for
the wrong GPU is no floor.

>>> from traceq.hardware import lookup
>>> hw = Measured(spec=lookup("NVIDIA L4"), seen="NVIDIA L4", gpus=1, budget=2048)
>>> hw.known, round(hw.scale("prefill_time"), 1), round(hw.scale("step_time"), 1)
(True, 8.2, 2.4)
>>> round(Measured(spec=lookup("NVIDIA L4"), seen="NVIDIA L4", chunked=False).scale("step_time"), 1)
2.4
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traceq.findings import Finding
from traceq.hardware import DEFAULT_ID, GpuSpec, by_id, lookup
from traceq.hardware.vllm_defaults import defaults
from traceq.playbooks.executor import Executor
from traceq.playbooks.model import Playbook
from traceq.playbooks.steps import run_query
from traceq.session import QueryError
from traceq.sql import load

REFERENCE = {
    # what time floors in the catalogue were set on: Llama-3.1-8B in bf16 (15 GiB of weights)
    # on one H100 SXM (989 TFLOP/s dense bf16), with vLLM's default step budget of 8,192
    # prefill tokens for an API server on a GPU of 70 GiB or more
    "weights_gib": 15.0,
    "tflops_bf16": 989.0,
    "budget": 8192.0,
    "hbm_gb_per_s": 3350.0,
}
SCALED = ("prefill_time", "step_time")
_LABELS = {
    "hbm_gb_per_s": "{:,.0f} GB/s memory bandwidth",
    "tflops_bf16": "{:,.0f} TFLOP/s bf16",
    "tflops_fp8": "{:,.0f} TFLOP/s fp8",
    "memory_gib": "{:,.0f} GB memory",
}


@dataclass(frozen=True)
class Measured:
    """The GPU of the run: `spec` is the one used; `seen` the name as the data printed it
    (None: no name in the data). `known` when the GPU was named (`named`: `--gpu`, which
    `spec` then is, whatever the data printed) or the data's name is in the table. From the start-up
    lines: tensor-parallel size, weights per GPU (GiB), prefill budget per step (tokens),
    chunked prefill on or off (None: not printed); `sglang` when SGLang's scheduler lines
    are in the data."""

    spec: GpuSpec
    seen: str | None = None
    gpus: int = 0
    tp: int | None = None
    weights_gib: float | None = None
    budget: float | None = None
    chunked: bool | None = None
    sglang: bool = False
    named: bool = False
    """The GPU was named by the person running traceq (`--gpu`), not read from the data."""

    @property
    def known(self) -> bool:
        return self.named or (self.seen is not None and lookup(self.seen) is not None)

    def scale(self, kind: str) -> float:
        """How much longer reference work takes here (`SCALED`), at least 1."""
        weights = self.weights_gib or REFERENCE["weights_gib"]
        if kind == "prefill_time":
            here = weights / self.spec.tflops_bf16
            ref = REFERENCE["weights_gib"] / REFERENCE["tflops_bf16"]
            return max(1.0, here / ref)
        # a step: its prefill tokens at peak compute (2 FLOPs per parameter, 2 bytes a
        # parameter), plus the weights read once at the memory bandwidth. A smaller budget
        # shortens it; a larger one, or none with chunked prefill off, is a choice whose
        # stalls are the finding (prefill-interference's fix), not a floor.
        if self.budget and self.chunked is not False:
            budget = self.budget
        elif self.sglang and self.chunked is None:
            budget = REFERENCE["budget"]  # SGLang's own chunk on a data-centre GPU
        else:  # chunked prefill off, or no budget printed: what turning it on here gives
            budget = default_budget(self.spec)
        budget = min(budget, REFERENCE["budget"])
        here = _step_s(weights, budget, self.spec.tflops_bf16, self.spec.hbm_gb_per_s)
        ref = _step_s(REFERENCE["weights_gib"], REFERENCE["budget"], REFERENCE["tflops_bf16"],
                      REFERENCE["hbm_gb_per_s"])  # fmt: skip
        return max(1.0, here / ref)


def default_budget(spec: GpuSpec) -> int:
    """vLLM's default step budget with chunked prefill on `spec`
    (traceq/hardware/vllm_defaults.py): 8,192 tokens on a GPU of 70 GiB or more other than
    an A100, else 2,048.

    >>> default_budget(lookup("NVIDIA H100 80GB HBM3")), default_budget(lookup("A100-SXM4-80GB"))
    (8192, 2048)
    """
    return defaults(spec.memory_gib, spec.id)["max_num_batched_tokens"]


def _scaled(name: str, value: float, factor: float | None) -> str:
    """A time floor the GPU scaled, and by how much when it did (None: a `--param` gave it).

    >>> _scaled("stall_ms", 250, 1.0), _scaled("stall_ms", 575, 2.3)
    ('stall_ms 250 ms', 'stall_ms 575 ms, 2.3× the floor for an 8B model on an H100')
    >>> _scaled("stall_ms", 400, None)
    'stall_ms 400 ms as given'
    """
    text = f"{name} {value:,.0f} ms"
    if factor is None:
        return f"{text} as given"
    return text if factor == 1 else f"{text}, {factor:.1f}× the floor for an 8B model on an H100"


def _step_s(weights_gib: float, tokens: float, tflops: float, gb_per_s: float) -> float:
    """Seconds of one step that prefills `tokens` and reads the weights once, at peak."""
    weights = weights_gib * 2**30
    return tokens * weights / (tflops * 1e12) + weights / (gb_per_s * 1e9)


def measured(session: Executor, named: GpuSpec | None = None) -> Measured:
    """The GPU most samples name, the GPUs that carried it and the engine's start-up
    figures; `named` (`--gpu`, `traceq.hardware.resolve`) replaces the samples' GPU."""
    try:
        rows = run_query(session, "gpu", load("gpu_measured")).frame.rows(named=True)
    except QueryError:
        rows = []
    first = rows[0] if rows else {}
    startup: dict[str, Any] = {
        "tp": int(first["tp"]) if first.get("tp") else None,
        "weights_gib": first.get("weights_gib"),
        "budget": first.get("budget"),
        "chunked": None if first.get("chunked") is None else bool(first["chunked"]),
        "sglang": bool(first.get("sglang")),
    }
    sampled = [r for r in rows if r["model_name"]]
    if named is not None:  # the data's name stays what it printed (the note says both)
        seen, gpus = (sampled[0]["model_name"], int(sampled[0]["gpus"])) if sampled else (None, 0)
        return Measured(named, seen, gpus, **startup, named=True)
    for r in sampled:  # the most sampled name the table knows, else the most sampled
        if (spec := lookup(r["model_name"])) is not None:
            return Measured(spec, r["model_name"], int(r["gpus"]), **startup)
    seen = sampled[0]["model_name"] if sampled else None
    gpus = int(sampled[0]["gpus"]) if sampled else 0
    return Measured(by_id(DEFAULT_ID), seen, gpus, **startup)


def params_for(
    pb: Playbook, hw: Measured, overrides: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The playbook's parameters (defaults, what the GPU sets, then `overrides`) and, when
    it has GPU parameters, what it used (`Finding.gpu`)."""
    params = {**pb.defaults()}
    figures = {name: p.gpu for name, p in pb.params.items() if p.gpu}
    if not figures:
        return {**params, **overrides}, None
    scaled = {}
    for name, figure in figures.items():
        if not hw.known:
            continue
        if figure in SCALED:
            scaled[name] = round(hw.scale(figure), 2)
            params[name] = round(float(params[name]) * scaled[name], 1)
        elif (value := getattr(hw.spec, figure)) is not None:
            params[name] = value
    params.update(overrides)
    given = sorted(n for n in figures if n in overrides)
    spec_used = any(f not in SCALED for n, f in figures.items() if n not in overrides)
    source = (
        ("named" if hw.named else "measured")
        if hw.known
        else "given"
        if given and not spec_used
        else "assumed"
    )
    use = {
        "gpu": hw.spec.name,
        "seen": hw.seen,
        "source": source,
        "given": given,
        "figures": {n: params[n] for n, f in figures.items() if f not in SCALED},
        # an overridden floor is the override, not the GPU's scale of the default
        "scaled": {
            n: {"value": params[n], "factor": None if n in overrides else f}
            for n, f in scaled.items()
        },
        "caps": spec_used and not hw.known,
        "spec_source": hw.spec.source,
        "gpus": hw.gpus,
        "tensor_parallel": hw.tp,
        "weights_gib": hw.weights_gib,
    }
    return params, use


def note(use: dict[str, Any], playbook: str) -> str:
    """One clause naming the GPU and the figures a finding used.

    >>> note({"gpu": "A100 SXM4 80GB", "seen": "NVIDIA A100-SXM4-80GB", "source": "measured",
    ...       "given": [], "figures": {"hbm_gb_per_s": 2039}, "scaled": {},
    ...       "tensor_parallel": 2}, "x")
    'on the A100 SXM4 80GB (2,039 GB/s memory bandwidth; TP 2)'
    >>> note({"gpu": "L4 24GB", "seen": "NVIDIA H100 80GB HBM3", "source": "named",
    ...       "given": [], "figures": {}, "scaled": {"stall_ms": {"value": 590, "factor": 2.4}}},
    ...      "x")
    'on the L4 24GB (named with --gpu; the data names NVIDIA H100 80GB HBM3; stall_ms 590 ms, \
2.4× the floor for an 8B model on an H100)'
    """
    labels = {n: _LABELS.get(n, "{:g} " + n).format(v) for n, v in use["figures"].items()}
    parts = list(labels.values())
    parts += [_scaled(n, s["value"], s["factor"]) for n, s in use["scaled"].items()]
    tp = use.get("tensor_parallel")
    parts += [f"TP {tp:g}"] if tp and tp > 1 else []
    if use["source"] in ("measured", "named"):
        named = ["named with --gpu"] if use["source"] == "named" else []
        printed = lookup(use["seen"]) if named and use["seen"] else None
        if named and use["seen"] and (printed is None or printed.name != use["gpu"]):
            named.append(f"the data names {use['seen']}")
        return f"on the {use['gpu']} ({'; '.join(named + parts)})"
    if use["source"] == "given":
        return f"with {', '.join(use['given'])} as given"
    why = (
        f"{use['seen']} is not in traceq/hardware/gpus.csv"
        if use["seen"]
        else "the data names no GPU"
    )
    first = next(iter(use["figures"]), None) or next(iter(use["scaled"]), "")
    assumed = f"assumed an {use['gpu']}" + (f" ({'; '.join(parts)})" if parts else "")
    warning = ", so at most a warning" if use.get("caps") else ""
    return (
        f"{assumed} because {why}{warning}; add nvidia-smi or DCGM samples, name it with "
        f"--gpu, or pass --param {playbook}.{first}=…"
    )


def cap(finding: Finding, use: dict[str, Any] | None) -> None:
    """State the GPU in a fired finding's message; a spec figure for an assumed GPU cannot
    fail. A playbook whose figures say `gpu_used` false for the worst window did without
    the GPU."""
    if use is None:
        return
    if any(w.get("gpu_used") is False for w in finding.windows if w.get("worst")):
        return  # the check that fired did without the spec (e.g. no model size)
    finding.gpu = use
    if finding.status not in ("fail", "warn"):
        return
    if use["source"] == "assumed" and not use.get("caps"):
        return  # reference floors, as the catalogue states them: nothing to add
    finding.message += f" — {note(use, finding.id)}"
    if use.get("caps") and finding.status == "fail":
        finding.status = "warn"
