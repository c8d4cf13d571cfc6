"""The KPIs of one dataset (`traceq report`): what each is, which way is better, and how the
baseline comparison resamples it. Definitions: docs/METRICS.md; SQL: traceq/sql/report_*.sql."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Better = Literal["lower", "higher"]


@dataclass(frozen=True)
class Kpi:
    """One KPI of the report's table and of the baseline comparison.

    `column` / `sample` name the column of the per-request (`requests`), per-gap (`gaps`) or
    per-time-window (`windows`) sample the bootstrap resamples; `q` makes it a quantile of that
    column, otherwise the statistic is `scale × mean(column) ** power` with `scale` measured
    per dataset (e.g. the GPU cost per second for the cost KPI). A KPI without `column` is
    compared by its thresholds alone (no interval).
    """

    name: str
    label: str
    unit: str
    better: Better
    group: str
    column: str | None = None
    sample: Literal["requests", "gaps", "windows"] = "requests"
    q: float | None = None
    power: float = 1.0


def _latency(
    metric: str, label: str, sample: Literal["requests", "gaps", "windows"] = "requests"
) -> list[Kpi]:
    return [
        Kpi(
            f"{metric}_p{round(q * 100)}_ms",
            f"{label} p{round(q * 100)}",
            "ms",
            "lower",
            "latency",
            f"{metric}_ms",
            sample,
            q,
        )
        for q in QUANTILES
    ]


QUANTILES = (0.5, 0.9, 0.95, 0.99)

KPIS: tuple[Kpi, ...] = (
    *_latency("ttft", "TTFT"),
    *_latency("tpot", "TPOT"),
    *_latency("tbt", "TBT", "gaps"),
    *_latency("e2e", "e2e"),
    Kpi(
        "requests_per_s",
        "Throughput (requests)",
        "req/s",
        "higher",
        "throughput",
        "requests_per_s",
        "windows",
    ),
    Kpi(
        "output_tokens_per_s",
        "Throughput (output tokens)",
        "tok/s",
        "higher",
        "throughput",
        "output_tokens_per_s",
        "windows",
    ),
    Kpi(
        "goodput_rps",
        "Goodput (requests meeting every SLO)",
        "req/s",
        "higher",
        "slo",
        "good_per_s",
        "windows",
    ),
    Kpi("slo_attainment", "SLO attainment", "ratio", "higher", "slo", "is_good"),
    Kpi("error_rate", "Error rate", "ratio", "lower", "reliability", "is_error"),
    Kpi(
        "cost_per_1m_output_tokens",
        "Cost per 1 M output tokens",
        "USD",
        "lower",
        "cost",
        "output_tokens_per_s",
        "windows",
        power=-1.0,
    ),
    Kpi("peak_kv_usage", "Peak KV-cache usage", "ratio", "lower", "engine"),
    Kpi("preemptions", "Preemptions", "count", "lower", "engine"),
    # the max sustainable rate at the report's SLO (traceq/report/headroom.py): no sample
    Kpi("headroom_rps", "Headroom (max sustainable rate)", "req/s", "higher", "capacity"),
)
BY_NAME = {k.name: k for k in KPIS}

# The KPIs `--trend` prints and the report's headline shows (seed part 2 §6.2: TTFT, TPOT,
# throughput and memory peak are what a release gate compares).
MAIN_KPIS = (
    "ttft_p95_ms",
    "tpot_p95_ms",
    "e2e_p95_ms",
    "output_tokens_per_s",
    "slo_attainment",
    "error_rate",
    "peak_kv_usage",
)
