"""The report's one door to the playbook engine: `diagnose(session)` runs the catalogue's
playbooks on the report's session and fills the predictions their incident roots cite, as
`traceq diagnose` and the app do (`diagnose_and_cite`, traceq/whatif/cite.py). An engine that
fails leaves the report an empty `Diagnosis` and a note, so the rest of the report is still
written. What the report shows of the diagnosis is incidents.py's `view`.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from traceq import __version__
from traceq.findings import Diagnosis
from traceq.playbooks import Options, load_catalog
from traceq.session import Session
from traceq.whatif.cite import diagnose_and_cite
from traceq.whatif.predict import Calibrated


def diagnose(
    session: Session,
    dataset_hash: str = "",
    calibrated: Calibrated | None = None,
    gpu: str | None = None,
) -> tuple[Diagnosis, str]:
    """Run every playbook on the session's dataset and cite their predictions, on
    `calibrated` (the dataset's engine model) when given, with `gpu` named as the run's GPU
    (`traceq report --gpu`): (diagnosis, note). The note says why the findings are empty
    when the engine failed; it is "" otherwise."""
    started = time.perf_counter()
    try:
        playbooks = load_catalog().playbooks
        return diagnose_and_cite(session, playbooks, Options(gpu=gpu), calibrated), ""
    except Exception as exc:  # the report must still be written
        return _empty(session, dataset_hash, started), f"the playbook engine failed: {exc}"


def _empty(session: Session, dataset_hash: str, started: float) -> Diagnosis:
    return Diagnosis(
        findings=[],
        dataset=str(session.dataset.root),
        dataset_hash=dataset_hash,
        traceq_version=__version__,
        started_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        elapsed_s=time.perf_counter() - started,
    )
