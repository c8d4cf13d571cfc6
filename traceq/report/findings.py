"""The report's one door to the playbook engine: `diagnose(session)`.

The engine (`traceq.playbooks`, branch `playbooks`) is imported lazily; while it is absent
the report gets an empty `Diagnosis` with a note, so the rest of the report works without it.
What the report shows of the diagnosis is incidents.py's `view`.
"""

from __future__ import annotations

import importlib
import time
from datetime import UTC, datetime
from typing import Any

from traceq import __version__
from traceq.findings import Diagnosis
from traceq.session import Session

ENGINE_MODULE = "traceq.playbooks"


def diagnose(session: Session, dataset_hash: str = "") -> tuple[Diagnosis, str]:
    """Run every playbook on the session's dataset: (diagnosis, note). The note says why the
    findings are empty when the engine is not installed or failed; it is "" otherwise."""
    started = time.perf_counter()
    try:
        engine: Any = importlib.import_module(ENGINE_MODULE)
    except ImportError:
        return _empty(session, dataset_hash, started), (
            "the playbook engine (traceq.playbooks) is not installed in this build: no findings"
        )
    run = getattr(engine, "diagnose", None)
    if run is None:
        return _empty(session, dataset_hash, started), (
            "traceq.playbooks has no diagnose(); findings left out"
        )
    try:
        # branch `playbooks`: diagnose(session, load_catalog().playbooks) -> Diagnosis
        catalog = getattr(engine, "load_catalog", None)
        result = run(session, catalog().playbooks) if catalog else run(session)
    except Exception as exc:  # the report must still be written
        return _empty(session, dataset_hash, started), f"the playbook engine failed: {exc}"
    if isinstance(result, dict):
        result = Diagnosis.from_dict(result)
    return result, ""


def _empty(session: Session, dataset_hash: str, started: float) -> Diagnosis:
    return Diagnosis(
        findings=[],
        dataset=str(session.dataset.root),
        dataset_hash=dataset_hash,
        traceq_version=__version__,
        started_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        elapsed_s=time.perf_counter() - started,
    )
