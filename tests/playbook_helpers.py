"""Shared fixtures for the playbook tests: scenario datasets, ingested once per session."""

from __future__ import annotations

from pathlib import Path

import orjson

from traceq.dataset import Dataset
from traceq.demo import ingest_scenario
from traceq.findings import Diagnosis
from traceq.ingest import IngestOptions
from traceq.playbooks import diagnose, load_catalog
from traceq.session import Session
from traceq.synth import generate

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
REAL = ROOT / "tests" / "data" / "real"


def ingest_folder(folder: Path, target: Path) -> Path:
    """Ingest one scenario folder (its labels.json says the log's year and zone)."""
    clock = orjson.loads((folder / "labels.json").read_bytes())["clock"]
    options = IngestOptions(year=clock["log_year"], tz=clock["log_timezone"])
    ingest_scenario(folder, target, lambda _: None, options)
    return target


def synth_dataset(root: Path, scenario: str, seed: int, requests: int | None = None) -> Path:
    """Generate `scenario` at `seed` and ingest it; returns the dataset path."""
    folder = root / f"{scenario}-{seed}"
    generate(scenario, folder, seed=seed, requests=requests)
    return ingest_folder(folder, root / f"{scenario}-{seed}.tq")


def run(dataset: Path | Dataset) -> Diagnosis:
    with Session(dataset) as session:
        return diagnose(session, load_catalog().playbooks)


def failing(d: Diagnosis) -> dict[str, object]:
    """The failing findings: the incidents' roots."""
    return {f.id: f for f in d.findings if f.status == "fail"}


def found(d: Diagnosis) -> dict[str, object]:
    """Every finding whose symptom holds: roots (`fail`) and consequences (`warn`)."""
    return {f.id: f for f in d.findings if f.status in ("fail", "warn")}
