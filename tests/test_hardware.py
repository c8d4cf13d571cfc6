"""The GPU spec table: the names real tools print map to one row each, every row has a source
and plausible figures, and the module's docstring example runs."""

from __future__ import annotations

import doctest

import pytest

import traceq.hardware
from traceq.hardware import DEFAULT_ID, by_id, lookup, patterns, specs

# What nvidia-smi --query-gpu=name, DCGM's modelName label and rocm-smi print, and the row each is.
NAMES = [
    ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"),
    ("A100-SXM-80GB", "a100-sxm4-80gb"),
    ("NVIDIA A100-SXM4-40GB", "a100-sxm4-40gb"),
    ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"),
    ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
    ("NVIDIA A100-PCIE-80GB", "a100-pcie-80gb"),
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA H100 NVL", "h100-nvl"),
    ("NVIDIA H200", "h200-sxm"),
    ("NVIDIA H200 NVL", "h200-nvl"),
    ("NVIDIA H20", "h20"),
    ("NVIDIA H800", "h800-sxm"),
    ("NVIDIA H800 PCIe", "h800-pcie"),
    ("NVIDIA B200", "b200"),
    ("NVIDIA GB200", "gb200"),
    ("NVIDIA L4", "l4"),
    ("NVIDIA L40S", "l40s"),
    ("NVIDIA L40", "l40"),
    ("NVIDIA A10", "a10"),
    ("NVIDIA A10G", "a10g"),
    ("Tesla T4", "t4"),
    ("NVIDIA T4", "t4"),
    ("NVIDIA GeForce RTX 3090", "rtx-3090"),
    ("NVIDIA GeForce RTX 3090 Ti", "rtx-3090-ti"),
    ("NVIDIA GeForce RTX 4090", "rtx-4090"),
    ("NVIDIA RTX A5000", "rtx-a5000"),
    ("AMD Instinct MI300X", "mi300x"),
    ("MI300X", "mi300x"),
    ("nvidia a100-sxm4-80gb", "a100-sxm4-80gb"),  # case does not matter
]

UNKNOWN = [
    "Quadro P400",
    "NVIDIA GeForce RTX 4090 Laptop GPU",
    "NVIDIA GeForce RTX 4090 D",
    "NVIDIA A800-SXM4-80GB",
    "NVIDIA RTX 4000 Ada Generation",
    "AMD Instinct MI250X",
    "   ",
    "",
    None,
]


@pytest.mark.parametrize(("name", "expected"), NAMES)
def test_real_names_map_to_their_row(name: str, expected: str) -> None:
    spec = lookup(name)
    assert spec is not None, name
    assert spec.id == expected


@pytest.mark.parametrize("name", UNKNOWN)
def test_unknown_names_map_to_none(name: str | None) -> None:
    assert lookup(name) is None


@pytest.mark.parametrize("name", [name for name, _ in NAMES] + [n for n in UNKNOWN if n])
def test_at_most_one_pattern_matches_each_name(name: str) -> None:
    matching = [spec_id for spec_id, pattern in patterns().items() if pattern.search(name)]
    assert len(matching) <= 1, (name, matching)


def test_every_row_has_a_source_and_plausible_figures() -> None:
    rows = specs()
    assert len(rows) >= 19
    ids = [spec.id for spec in rows]
    assert len(ids) == len(set(ids)), "duplicate ids"
    for spec in rows:
        assert spec.source.startswith("https://"), spec.id
        assert spec.name and spec.vendor in {"NVIDIA", "AMD"}, spec.id
        assert spec.memory_gib > 0, spec.id
        assert spec.hbm_gb_per_s > 0, spec.id
        assert spec.tflops_bf16 > 0, spec.id
        if spec.tflops_fp8 is not None:
            assert spec.tflops_fp8 >= spec.tflops_bf16, spec.id


def test_gpus_without_fp8_have_none() -> None:
    for spec_id in ("a100-sxm4-80gb", "a100-pcie-40gb", "a10", "a10g", "rtx-3090", "t4"):
        assert by_id(spec_id).tflops_fp8 is None, spec_id


def test_anchor_figures() -> None:
    h100 = by_id("h100-sxm")
    assert (h100.memory_gib, h100.hbm_gb_per_s, h100.tflops_bf16, h100.tflops_fp8) == (
        80,
        3350,
        989,
        1979,
    )
    assert by_id("a100-sxm4-80gb").hbm_gb_per_s == 2039
    assert by_id("mi300x").tflops_bf16 == pytest.approx(1307.4)


def test_default_is_a_known_row() -> None:
    assert by_id(DEFAULT_ID).id == "h100-sxm"


def test_by_id_unknown_raises_key_error_naming_known_ids() -> None:
    with pytest.raises(KeyError, match="h100-sxm"):
        by_id("no-such-gpu")


def test_specs_are_read_once() -> None:
    assert specs() == specs()
    assert specs()[0] is specs()[0]


def test_docstring_example_runs() -> None:
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = doctest.testmod(traceq.hardware, optionflags=flags)
    assert result.attempted > 0
    assert result.failed == 0
