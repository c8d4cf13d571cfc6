"""Getting a dataset to open: the bundled sample_traces/ scenarios and uploaded raw files,
ingested into new datasets under the app's work folder with progress reported as a fraction.
No Streamlit here (traceq/app/pages/home.py draws it)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import orjson

from traceq.ingest import IngestOptions, IngestResult, InputError, ingest

SAMPLE_TRACES = Path(__file__).resolve().parents[2] / "sample_traces"
LABELS = "labels.json"
ENV_WORKDIR = "TRACEQ_APP_DIR"

Progress = Callable[[float, str], None]


def workdir() -> Path:
    """Where the app writes the datasets it creates ($TRACEQ_APP_DIR, else a temp folder)."""
    root = Path(os.environ.get(ENV_WORKDIR) or Path(tempfile.gettempdir()) / "traceq-app")
    root.mkdir(parents=True, exist_ok=True)
    return root


def scenarios(root: Path = SAMPLE_TRACES) -> dict[str, str]:
    """Bundled scenarios: folder name → description (from its labels.json)."""
    if not root.is_dir():
        return {}
    out = {}
    for folder in sorted(p for p in root.iterdir() if (p / LABELS).is_file()):
        out[folder.name] = orjson.loads((folder / LABELS).read_bytes()).get("description", "")
    return out


def ingest_with_progress(
    paths: Iterable[Path], target: Path, options: IngestOptions, progress: Progress
) -> tuple[list[IngestResult], list[str]]:
    """Ingest `paths` into `target`, reporting the share of input bytes read so far; returns
    the results and one line per file that could not be ingested (unknown format, empty)."""
    files = [p for p in paths if p.is_file()]
    total = max(sum(p.stat().st_size for p in files), 1)
    done = 0
    results: list[IngestResult] = []
    problems: list[str] = []
    for f in files:
        progress(min(done / total, 1.0), f"reading {f.name}")

        def step(n: int, name: str = f.name) -> None:
            nonlocal done
            done += n
            progress(min(done / total, 1.0), f"reading {name}")

        try:
            results += ingest([f], target, options=options, progress=step)
        except InputError as exc:
            problems.append(str(exc))
    progress(1.0, "done")
    return results, problems


def ingest_folder(
    folder: Path, target: Path, options: IngestOptions, progress: Progress
) -> list[IngestResult]:
    """Ingest every file under `folder` (uploads): a file no reader recognises is listed in the
    dataset with a quarantine row, like any folder given to `traceq ingest`."""
    total = max(sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()), 1)
    done = 0

    def step(n: int) -> None:
        nonlocal done
        done += n
        progress(min(done / total, 1.0), f"ingested {done / 1e6:,.1f} of {total / 1e6:,.1f} MB")

    progress(0.0, "starting")
    results = ingest([folder], target, options=options, progress=step)
    progress(1.0, "done")
    return results


def open_sample(name: str, progress: Progress, root: Path = SAMPLE_TRACES) -> Path:
    """Ingest scenario `name` (once; re-ingesting the same files is a no-op) and return it."""
    folder = root / name
    labels = orjson.loads((folder / LABELS).read_bytes())
    clock = labels.get("clock", {})
    options = IngestOptions(year=clock.get("log_year"), tz=clock.get("log_timezone", "UTC"))
    target = workdir() / "samples" / f"{name}.tq"
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.name != LABELS)
    _, problems = ingest_with_progress(files, target, options, progress)
    if problems:
        raise InputError("; ".join(problems))
    return target


def save_uploads(uploads: Iterable[tuple[str, bytes]], folder: Path) -> list[Path]:
    """Write uploaded (name, bytes) pairs into `folder` under their base names."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, payload in uploads:
        path = folder / Path(name).name
        path.write_bytes(payload)
        paths.append(path)
    return paths
