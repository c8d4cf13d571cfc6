"""Measure one dataset for the report: KPIs, phase breakdown, request profile, timelines and
the bounded samples the baseline comparison resamples. Every figure comes from SQL in
traceq/sql/report_*.sql run through one `Session`."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import polars as pl

from traceq import __version__
from traceq.report.kpis import QUANTILES
from traceq.report.sample import bounded_sample
from traceq.session import Session
from traceq.slo import DEFAULT_GPU_HOUR_USD, DEFAULT_SLO
from traceq.sql import load

SAMPLE_CAP = 10_000
"""Requests (and chunk gaps) kept in the sample a baseline stores: the bootstrap's interval
for a p95 from 10 000 values is within ~1 % of the one from all values, the file stays
~0.5 MB, and resampling it 1 000 times takes well under a second (docs/REPORT.md)."""

SAMPLE_SEED = 20_251_201
"""Seed of the hash that picks the sample: fixed, so one dataset always gives one sample."""

PHASES = ("tokenize", "queue", "prefill", "decode", "residual")
"""The phase breakdown's rows, in order (report_phases.sql, one query each)."""

TIMELINE_BUCKETS = 120
"""Windows on the report's time axis: enough to see a 1-minute event in a 2-hour run."""


@dataclass
class Measurement:
    """Everything the report shows about one dataset, and what a baseline keeps of it."""

    dataset: str
    dataset_hash: str
    time_range: dict[str, Any]
    traceq_version: str
    measured_at: str
    params: dict[str, Any]
    values: dict[str, float | None]
    scales: dict[str, float]
    context: dict[str, Any]
    samples: dict[str, pl.DataFrame]
    phases: pl.DataFrame = field(default_factory=pl.DataFrame)
    timeline: pl.DataFrame = field(default_factory=pl.DataFrame)
    engine_timeline: pl.DataFrame = field(default_factory=pl.DataFrame)


def dataset_hash(manifest: dict[str, Any]) -> str:
    """sha256 over the sorted content hashes of the dataset's sources: the same files give
    the same hash whatever their names or ingest order."""
    hashes = sorted(str(s.get("content_hash", "")) for s in manifest.get("sources", []))
    return "sha256:" + hashlib.sha256("\n".join(hashes).encode()).hexdigest()


def _iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def measure(
    session: Session,
    *,
    slo: dict[str, float | None] | None = None,
    gpu_hour_usd: float = DEFAULT_GPU_HOUR_USD,
    gpus: int | None = None,
    sample_cap: int = SAMPLE_CAP,
) -> Measurement:
    """Run the report's queries on `session`'s dataset.

    `gpus` overrides the GPU count for the cost KPI (default: the GPUs in gpu_samples, else 1).
    """
    slo = {**DEFAULT_SLO, **(slo or {})}
    slo_params = {f"slo_{k}": (None if v is None else float(v)) for k, v in slo.items()}
    k = session.query(load("report_kpis"), slo_params).row(0, named=True)
    t = session.query(load("report_tbt")).row(0, named=True)
    e = session.query(load("report_engine")).row(0, named=True)
    n = k["requests"] or 0
    duration = k["duration_s"] or 0.0
    n_gpus = gpus or e["gpus"] or 1
    values: dict[str, float | None] = {}
    latency = {
        m: session.query(load("report_latency"), {"metric": f"{m}_ms"}).row(0)[0]
        for m in ("ttft", "tpot", "e2e")
    }
    for metric, qs in (*latency.items(), ("tbt", t["tbt_q"])):
        for q, v in zip(QUANTILES, qs or [None] * len(QUANTILES), strict=True):
            values[f"{metric}_p{round(q * 100)}_ms"] = v
    rate = n / duration if duration > 0 else None
    out_tokens = k["output_tokens"] or 0
    # Unknown is not zero: a log without token counts has no token throughput, and where no
    # request has a TTFT (a server log without request stamps) the TTFT SLO judges nothing
    tokens_known = k["output_tokens"] is not None
    judged = n > 0 and (slo.get("ttft_ms") is None or k["ttft_measured"] > 0)
    gpu_hours = n_gpus * duration / 3600
    values |= {
        "requests_per_s": rate,
        "output_tokens_per_s": out_tokens / duration if duration > 0 and tokens_known else None,
        "goodput_rps": k["good_requests"] / duration if duration > 0 and judged else None,
        "slo_attainment": k["good_requests"] / n if judged else None,
        "error_rate": k["errors"] / n if n else None,
        "cost_per_1m_output_tokens": (
            gpu_hours * gpu_hour_usd / out_tokens * 1e6 if out_tokens and duration > 0 else None
        ),
        "peak_kv_usage": e["peak_kv_usage"],
        "preemptions": None if e["preemptions"] is None else float(e["preemptions"]),
        "headroom_rps": None,  # the engine model's, set by build_report (headroom.py)
    }
    # scale × mean(sample column) ** power gives each non-quantile KPI (kpis.Kpi); throughput
    # KPIs are means over the timeline's equal windows, so their spread over time sets the interval
    scales = {
        "requests_per_s": 1.0,
        "output_tokens_per_s": 1.0,
        "goodput_rps": 1.0,
        "slo_attainment": 1.0,
        "error_rate": 1.0,
        # USD per 1 M tokens = GPU cost per second × 1e6 / output tokens per second
        "cost_per_1m_output_tokens": n_gpus * gpu_hour_usd / 3600 * 1e6,
    }
    timeline = session.query(load("report_timeline"), {**slo_params, "buckets": TIMELINE_BUCKETS})
    samples = {
        "requests": bounded_sample(
            session, "report_sample_requests", {**slo_params, "seed": SAMPLE_SEED}, n, sample_cap
        ),
        "gaps": bounded_sample(
            session, "report_sample_gaps", {"seed": SAMPLE_SEED}, t["gaps"] or 0, sample_cap
        ),
        "windows": timeline.select("requests_per_s", "output_tokens_per_s", "good_per_s"),
    }
    t_start, t_end = k["t_start"], k["t_end"]
    return Measurement(
        dataset=str(session.dataset.root),
        dataset_hash=dataset_hash(session.manifest),
        time_range={
            "start_ns": t_start,
            "end_ns": t_end,
            "start": _iso(t_start),
            "end": _iso(t_end),
        },
        traceq_version=__version__,
        measured_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        params={
            "slo": slo,
            "gpu_hour_usd": gpu_hour_usd,
            "gpus": n_gpus,
            "sample_cap": sample_cap,
            "sample_seed": SAMPLE_SEED,
        },
        values=values,
        scales=scales,
        context={
            "requests": n,
            "errors": k["errors"],
            "good_requests": k["good_requests"],
            "duration_s": duration,
            "output_tokens": out_tokens,
            "prompt_tokens": k["prompt_tokens"] or 0,
            "gaps": t["gaps"],
            "gpus": n_gpus,
            "gpus_seen": e["gpus"],
            # neither --gpus nor a GPU sample said how many: the cost assumes one
            "gpus_assumed": not gpus and not e["gpus"],
            "gpu_hours": gpu_hours,
            "peak_waiting": e["peak_waiting"],
            "peak_running": e["peak_running"],
            "engine_samples": e["engine_samples"],
            "ttft_mean_ms": k["ttft_mean"],
            "tpot_mean_ms": k["tpot_mean"],
            "e2e_mean_ms": k["e2e_mean"],
            "tbt_mean_ms": t["tbt_mean"],
            # what a dataset without requests holds instead (`traceq report` says so)
            **({"holds": session.query(load("report_holds")).row(0, named=True)} if not n else {}),
        },
        samples=samples,
        phases=pl.concat([session.query(load("report_phases"), {"phase": p}) for p in PHASES]),
        timeline=timeline,
        engine_timeline=session.query(
            load("report_engine_timeline"), {"buckets": TIMELINE_BUCKETS}
        ),
    )
