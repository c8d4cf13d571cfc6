"""Build a report: measure the dataset and its Headroom, run the playbooks (with the
predictions they cite), compare with a baseline."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

from traceq.findings import Diagnosis, Finding, Incident
from traceq.hardware import resolve
from traceq.report.baseline import failing_incidents, known_roots, load_baseline, to_baseline
from traceq.report.compare import Change, compare, workload_shift
from traceq.report.findings import diagnose
from traceq.report.headroom import Headroom, measure_headroom
from traceq.report.incidents import View, view
from traceq.report.measure import SAMPLE_CAP, Measurement, measure
from traceq.report.thresholds import Thresholds, load_thresholds
from traceq.session import Session
from traceq.slo import DEFAULT_GPU_HOUR_USD, DEFAULT_SLO


@dataclass
class ReportOptions:
    """What `traceq report` takes besides the dataset (CLI options of the same names)."""

    baseline: str | os.PathLike[str] | None = None
    thresholds: str | os.PathLike[str] | None = None
    slo: dict[str, float | None] = field(default_factory=dict)
    gpu_hour_usd: float = DEFAULT_GPU_HOUR_USD
    gpus: int | None = None
    gpu: str | None = None
    """The GPU the run served on, for the playbooks' GPU-scaled floors where the data names
    none (`traceq diagnose --gpu`)."""
    sample_cap: int = SAMPLE_CAP
    findings: bool = True
    headroom: bool = True
    memory_limit: str = "2GB"
    time_limit_s: float = 600.0


@dataclass
class Report:
    """A measured dataset, its findings and (with a baseline) the comparison."""

    measurement: Measurement
    diagnosis: Diagnosis
    findings_note: str
    thresholds: Thresholds
    baseline: dict[str, Any] | None = None
    changes: list[Change] = field(default_factory=list)
    load_shift: list[str] = field(default_factory=list)
    """Load figures that differ from the baseline's (compare.workload_shift)."""
    findings_evaluated: bool = True
    """False when the playbooks did not run (engine absent, failed, or --no-findings)."""

    @property
    def regressed(self) -> list[Change]:
        return [c for c in self.changes if c.verdict == "regressed"]

    @property
    def improved(self) -> list[Change]:
        return [c for c in self.changes if c.verdict == "improved"]

    def view(self) -> View:
        """The diagnosis as the report shows it: incidents worst first, each marked new when
        its root is not among the baseline's incidents (traceq/report/incidents.py)."""
        return view(self.diagnosis, known_roots(self.baseline))

    def incidents(self) -> list[tuple[Incident, bool]]:
        """`Diagnosis.failing()`, worst first, each with "new against the baseline"."""
        return [(b.incident, b.new) for b in self.view().blocks]

    def findings(self) -> list[tuple[Finding, bool]]:
        """The root finding of each incident, worst first, with "new against the baseline";
        consequences are not listed (they are named under their incident)."""
        return [(b.root, b.new) for b in self.view().blocks if b.root is not None]

    def baseline_doc(self) -> dict[str, Any]:
        """This run as a baseline for later runs (`--save-baseline`)."""
        evaluated = self.findings_evaluated
        return to_baseline(self.measurement, self.diagnosis if evaluated else None)

    def to_dict(self) -> dict[str, Any]:
        """The JSON report (`-o report.json`): everything but the samples and charts."""
        m = self.measurement
        base = self.baseline
        shown = self.view()
        return {
            "kind": "traceq-report",
            "dataset": m.dataset,
            "dataset_hash": m.dataset_hash,
            "time_range": m.time_range,
            "traceq_version": m.traceq_version,
            "measured_at": m.measured_at,
            "params": m.params,
            "kpis": m.values,
            "context": m.context,
            "phases": m.phases.to_dicts(),
            "findings_note": self.findings_note,
            "incidents": [{**asdict(b.incident), "new": b.new} for b in shown.blocks],
            "tail": list(self.diagnosis.tail or []),
            "findings": [{**f.to_dict(), "new": new} for f, new in self.findings()],
            "not_run": shown.not_run,
            "assumed_gpu": shown.assumed_gpu,
            "baseline": None
            if base is None
            else {
                "dataset": base.get("dataset"),
                "dataset_hash": base.get("dataset_hash"),
                "time_range": base.get("time_range"),
                "traceq_version": base.get("traceq_version"),
                "measured_at": base.get("measured_at"),
                "incidents": base.get("incidents", []),
                "findings": base.get("findings", []),
            },
            "comparison": [c.to_dict() for c in self.changes],
            "regressed": [c.kpi for c in self.regressed],
            "load_shift": self.load_shift,
            "thresholds": {
                "confidence": self.thresholds.confidence,
                "resamples": self.thresholds.resamples,
                "seed": self.thresholds.seed,
            },
        }


def _as_current(m: Measurement) -> dict[str, Any]:
    return {"values": m.values, "scales": m.scales, "samples": m.samples}


def build_report(
    dataset: str | os.PathLike[str], options: ReportOptions | None = None, **kw: Any
) -> Report:
    """Measure `dataset` and its Headroom, run the playbooks on the Headroom's calibration
    (traceq/report/findings.py), and compare with `options.baseline` if given.

    Raises `traceq.session.QueryError`, `BaselineError` or `ThresholdError` on bad input.
    """
    opts = options or ReportOptions(**kw)
    if opts.gpu is not None:
        resolve(opts.gpu)  # a name the GPU table lacks is bad input, not a failed diagnosis
    thresholds = load_thresholds(opts.thresholds)
    baseline = load_baseline(opts.baseline) if opts.baseline is not None else None
    slo = {**DEFAULT_SLO, **opts.slo}
    # Headroom first: the engine model it calibrates serves the predictions playbooks cite.
    if opts.headroom:
        h = measure_headroom(dataset, slo, opts.gpu_hour_usd, opts.time_limit_s)
    else:
        h = Headroom(None, note="No Headroom figure: not requested (--no-headroom).")
    with Session(dataset, time_limit_s=opts.time_limit_s, memory_limit=opts.memory_limit) as s:
        m = measure(
            s,
            slo=slo,
            gpu_hour_usd=opts.gpu_hour_usd,
            gpus=opts.gpus,
            sample_cap=opts.sample_cap,
        )
        if opts.findings:
            diagnosis, note = diagnose(s, m.dataset_hash, h.calibrated, opts.gpu)
        else:
            diagnosis, note = (
                Diagnosis([], m.dataset, m.dataset_hash, m.traceq_version, m.measured_at, 0.0),
                "findings not requested",
            )
    m.params["gpu"] = opts.gpu  # the GPU named for the playbooks' floors, or None
    m.values["headroom_rps"] = h.rate_rps
    m.context["headroom"] = h.to_dict()
    changes, shift = [], []
    if baseline is not None:
        changes = compare(baseline, _as_current(m), thresholds)
        shift = workload_shift(baseline, _as_current(m), thresholds)
    return Report(m, diagnosis, note, thresholds, baseline, changes, shift, not note)


__all__ = ["Report", "ReportOptions", "build_report", "failing_incidents"]
