"""Baseline files (`--save-baseline`, `--baseline`): one JSON document with the KPIs, the
bounded samples the comparison resamples, the scales that turn a sample mean into a KPI, the
dataset's hash and time range, the traceq version and the incidents the playbooks found
(`Diagnosis.failing()`: one per root cause, its consequences named under it, never counted
apart)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from traceq.findings import Diagnosis
from traceq.report.incidents import view
from traceq.report.measure import Measurement

KIND = "traceq-baseline"
FORMAT_VERSION = 1


class BaselineError(ValueError):
    """A baseline file that cannot be read or is not a traceq baseline."""


def _columns(frame: pl.DataFrame) -> dict[str, list[Any]]:
    # 6 significant digits: far below any threshold, and the file half the size
    out: dict[str, list[Any]] = {}
    for name in frame.columns:
        s = frame[name]
        if s.dtype.is_float():
            s = s.round_sig_figs(6)
        out[name] = s.to_list()
    return out


def failing_incidents(diagnosis: Diagnosis | None) -> list[dict[str, Any]]:
    """The incidents of `diagnosis` (`Diagnosis.failing()`, worst first, as the report shows
    them: incidents.view): root, root cause, severity, title, window and consequences."""
    if diagnosis is None:
        return []
    return [
        {
            "root": i.root,
            "root_cause": i.root_cause,
            "severity": i.severity,
            "title": i.title,
            "start": i.start,
            "end": i.end,
            "consequences": list(i.consequences),
        }
        for i in (b.incident for b in view(diagnosis).blocks)
    ]


def known_roots(doc: dict[str, Any] | None) -> set[str] | None:
    """The incident roots of a baseline document, to tell new incidents from known ones; None
    when there is no baseline or its playbooks did not run (then nothing is new). A baseline
    written before incidents existed lists its failed and warned findings instead."""
    if doc is None or not doc.get("findings_evaluated", True):
        return None
    if "incidents" in doc:
        return {i["root"] for i in doc["incidents"]}
    return {f["id"] for f in doc.get("findings", [])}


def to_baseline(m: Measurement, diagnosis: Diagnosis | None) -> dict[str, Any]:
    """The baseline document of a measurement; `diagnosis` None when the playbooks did not run
    (then no later incident counts as new against it)."""
    incidents = failing_incidents(diagnosis)
    return {
        "kind": KIND,
        "format_version": FORMAT_VERSION,
        "dataset": m.dataset,
        "dataset_hash": m.dataset_hash,
        "time_range": m.time_range,
        "traceq_version": m.traceq_version,
        "measured_at": m.measured_at,
        "params": m.params,
        "values": m.values,
        "scales": m.scales,
        "context": m.context,
        "findings_evaluated": diagnosis is not None,
        "incidents": incidents,
        # the roots, in the shape baselines had before incidents (id, severity, title, status)
        "findings": [
            {"id": i["root"], "severity": i["severity"], "title": i["title"], "status": "fail"}
            for i in incidents
        ],
        "samples": {name: _columns(frame) for name, frame in m.samples.items()},
    }


def save_baseline(doc: dict[str, Any], path: str | Path) -> None:
    """Write `doc` atomically (a half-written baseline would break tomorrow's gate)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY))
    tmp.replace(target)


def load_baseline(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check a baseline file; samples come back as polars frames."""
    try:
        doc = orjson.loads(Path(path).read_bytes())
    except OSError as exc:
        raise BaselineError(f"baseline {path}: {exc.strerror or exc}") from exc
    except orjson.JSONDecodeError as exc:
        raise BaselineError(f"baseline {path}: not JSON ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise BaselineError(f'baseline {path}: not a traceq baseline (no "kind": "{KIND}")')
    if doc.get("format_version") != FORMAT_VERSION:
        raise BaselineError(
            f"baseline {path}: format version {doc.get('format_version')!r}, "
            f"this traceq reads {FORMAT_VERSION}"
        )
    for key in ("values", "scales", "samples"):
        if not isinstance(doc.get(key), dict):
            raise BaselineError(f"baseline {path}: missing {key!r}")
    try:
        doc["samples"] = {
            name: pl.DataFrame(cols, strict=False) for name, cols in doc["samples"].items()
        }
    except (TypeError, ValueError, pl.exceptions.PolarsError) as exc:
        raise BaselineError(f"baseline {path}: bad samples ({exc})") from exc
    return doc
