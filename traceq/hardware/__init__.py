"""GPU spec table: memory, memory bandwidth and dense tensor throughput per GPU model, each row
with the URL its figures come from (`gpus.csv` in this package), and a lookup from the names that
nvidia-smi (`--query-gpu=name`), DCGM (`modelName` label) and rocm-smi print.

Units and conventions of the table:

- `memory_gib`: the vendor's "GB" figure as written on the datasheet (80 for an 80 GB part), not
  a conversion; what the driver reports in MiB is a little less (reserved memory, ECC).
- `hbm_gb_per_s`: peak memory bandwidth (HBM or GDDR) in GB/s (10^9 bytes per second).
- `tflops_bf16`, `tflops_fp8`: peak DENSE tensor TFLOP/s, i.e. without 2:4 structured sparsity
  (datasheets mostly print the sparse figure, twice as large). `tflops_fp8` is None for GPUs
  without FP8 tensor cores (Ampere, Turing). GeForce cards use the FP32-accumulate rate (RTX 4090:
  165.2 BF16, 330.3 FP8). The T4 has no BF16: its `tflops_bf16` holds the FP16 mixed-precision
  figure (65). B200 is the HGX part (180 GB, 7.7 TB/s); GB200 is one GPU of the superchip.
  MI300X figures are AMD's dense peaks.
- Figures not printed by the vendor: the A10G's (AWS publishes 24 GB only; 600 GB/s and 70
  TFLOP/s BF16 are the widely quoted figures, consistent with 80 SMs at 1710 MHz at the GA102
  GeForce-class tensor rate), the RTX 3090 Ti's BF16 (80, the RTX 3090 whitepaper rate scaled to
  84 SMs at 1860 MHz) and the H20's (NVIDIA publishes no datasheet; the row cites the public
  report of its spec sheet).

Rows are looked up by their `match` regex (case-insensitive, searched in the name). The patterns
are mutually exclusive ("A10" does not match "A100", "H20" not "H200", "L40" not "L40S"), so the
row order does not decide a lookup.

>>> from traceq.hardware import DEFAULT_ID, by_id, lookup
>>> lookup("NVIDIA H100 80GB HBM3").id
'h100-sxm'
>>> spec = lookup("NVIDIA A10G")
>>> spec.id, spec.memory_gib, spec.hbm_gb_per_s, spec.tflops_fp8
('a10g', 24.0, 600.0, None)
>>> lookup("Quadro P400") is None
True
>>> by_id(DEFAULT_ID).name
'H100 SXM5 80GB'
"""

from __future__ import annotations

import csv
import functools
import io
import re
from dataclasses import dataclass
from importlib import resources

__all__ = ["DEFAULT_ID", "GpuSpec", "by_id", "lookup", "patterns", "resolve", "specs"]

#: What is assumed when the GPU is unknown: the H100 SXM, the most common serving GPU.
DEFAULT_ID = "h100-sxm"

_COLUMNS = (
    "id",
    "name",
    "vendor",
    "memory_gib",
    "hbm_gb_per_s",
    "tflops_bf16",
    "tflops_fp8",
    "match",
    "source",
)


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model: memory (vendor GB), peak memory bandwidth (GB/s), dense tensor TFLOP/s."""

    id: str
    name: str
    vendor: str
    memory_gib: float
    hbm_gb_per_s: float
    tflops_bf16: float
    tflops_fp8: float | None
    source: str


@functools.cache
def _rows() -> tuple[tuple[re.Pattern[str], GpuSpec], ...]:
    text = resources.files(__package__).joinpath("gpus.csv").read_text(encoding="utf-8")
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != _COLUMNS:
        raise ValueError(f"gpus.csv: columns {reader.fieldnames}, expected {list(_COLUMNS)}")
    rows = []
    for row in reader:
        spec = GpuSpec(
            id=row["id"],
            name=row["name"],
            vendor=row["vendor"],
            memory_gib=float(row["memory_gib"]),
            hbm_gb_per_s=float(row["hbm_gb_per_s"]),
            tflops_bf16=float(row["tflops_bf16"]),
            tflops_fp8=float(row["tflops_fp8"]) if row["tflops_fp8"] else None,
            source=row["source"],
        )
        rows.append((re.compile(row["match"], re.IGNORECASE), spec))
    return tuple(rows)


def specs() -> tuple[GpuSpec, ...]:
    """Every row of the table, in file order (read once)."""
    return tuple(spec for _, spec in _rows())


def patterns() -> dict[str, re.Pattern[str]]:
    """The compiled `match` regex of each row, by id."""
    return {spec.id: pattern for pattern, spec in _rows()}


def lookup(name: str | None) -> GpuSpec | None:
    """The spec whose `match` regex finds `name` (an nvidia-smi / DCGM / rocm-smi GPU name);
    None for an empty or unknown name."""
    if not name or not name.strip():
        return None
    for pattern, spec in _rows():
        if pattern.search(name):
            return spec
    return None


def by_id(spec_id: str) -> GpuSpec:
    """The spec with id `spec_id`; KeyError naming the known ids otherwise."""
    for spec in specs():
        if spec.id == spec_id:
            return spec
    known = ", ".join(spec.id for spec in specs())
    raise KeyError(f"unknown GPU id {spec_id!r}; known: {known}")


def resolve(text: str) -> GpuSpec:
    """The spec a person names (`traceq diagnose --gpu`): a row's id (`l4`, `a100-sxm4-80gb`)
    or a name its `match` regex finds, as nvidia-smi prints it; ValueError naming the rows
    that could be meant (or every id) otherwise.

    >>> resolve("L4").name, resolve("a100-pcie-80gb").name, resolve("NVIDIA H200").id
    ('L4 24GB', 'A100 PCIe 80GB', 'h200-sxm')
    >>> resolve("A100")
    Traceback (most recent call last):
    ...
    ValueError: GPU 'A100' is ambiguous or unknown: name one of a100-pcie-40gb, \
a100-sxm4-40gb, a100-pcie-80gb, a100-sxm4-80gb (traceq/hardware/gpus.csv)
    """
    wanted = text.strip().lower()
    for spec in specs():
        if spec.id == wanted:
            return spec
    found = lookup(text)
    if found is not None:
        return found
    near = [s.id for s in specs() if wanted and (wanted in s.id or wanted in s.name.lower())]
    listed = ", ".join(near or [s.id for s in specs()])
    kind = "is ambiguous or unknown" if near else "is not in the table"
    raise ValueError(f"GPU {text!r} {kind}: name one of {listed} (traceq/hardware/gpus.csv)")
