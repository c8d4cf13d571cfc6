"""The defaults every SLO-judged figure starts from: the per-request SLO and the price of a
GPU-hour that `traceq report` (traceq/report/), `traceq whatif` (traceq/whatif/) and the
predictions playbooks cite (traceq/whatif/cite.py) use unless told otherwise. They live here,
apart from both packages, so that neither imports the other for them.

>>> DEFAULT_SLO["ttft_ms"], DEFAULT_GPU_HOUR_USD
(2000.0, 2.0)
"""

from __future__ import annotations

DEFAULT_SLO: dict[str, float | None] = {"ttft_ms": 2000.0, "tpot_ms": 100.0, "e2e_ms": None}
"""Per-request SLO for goodput: TTFT 2 s (an interactive chat answer starts within ~2 s),
TPOT 100 ms (10 tokens/s, faster than people read). No e2e limit by default: e2e grows with
the answer's length. Override with `--slo ttft_ms=…,tpot_ms=…,e2e_ms=…`."""

DEFAULT_GPU_HOUR_USD = 2.0
"""Price of one GPU-hour for the cost KPI, USD: an order of magnitude for one H100 rented by
the hour; set your own with `--gpu-hour-price`. Only ratios between runs matter for a gate."""
