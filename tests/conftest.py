"""Session-wide fixtures: work that several test files need done identically, done once.

- `demo_run`: `traceq demo` over sample_traces/ in a fresh process, once per test run: the
  first pytest-xdist worker to ask runs it under a lock, the other reads what it left
  (`shared_root`). tests/test_cli.py and
  tests/test_synth_roundtrip.py assert on its output; tests/test_playbooks_catalog.py
  diagnoses the datasets it ingested (every bundled scenario, ingested the way
  tests/playbook_helpers.py's `ingest_folder` does: the same `ingest_scenario`, the same
  labels.json options).
- `report_root`: where tests/report_factory.py's `make_dataset` caches the generated
  datasets of tests/test_report_gate.py and tests/test_report_output.py (both use healthy
  and kv-pressure at seed 1), with the files each writes beside them under distinct names.
- `app_workdir`: the app's work folder (`TRACEQ_APP_DIR`) shared by the app tests, so the
  kv-pressure sample is ingested once (re-opening a sample there is a no-op).

Tests only read these datasets; one that writes makes its own.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest


@dataclass(frozen=True)
class DemoRun:
    result: subprocess.CompletedProcess
    out: Path

    def dataset(self, scenario: str) -> Path:
        """The dataset the demo ingested for sample_traces/`scenario`."""
        path = self.out / f"{scenario}.tq"
        assert (path / "manifest.json").is_file(), (scenario, self.result.stderr[-2000:])
        return path


def shared_root(tmp_path_factory) -> Path:
    """A folder every pytest-xdist worker of this run sees: the parent of the workers' own
    temporary folders (`.../pytest-N/popen-gwK`); without xdist, the run's own folder."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory) -> DemoRun:
    root = shared_root(tmp_path_factory)
    out, record = root / "demo", root / "demo.json"
    with (root / "demo.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not record.is_file():
            args = [sys.executable, "-m", "traceq", "demo", "-o", str(out)]
            done = subprocess.run(args, capture_output=True, text=True, check=False)
            kept = {"args": args, "returncode": done.returncode}
            record.write_bytes(orjson.dumps({**kept, "stdout": done.stdout, "stderr": done.stderr}))
    result = subprocess.CompletedProcess(**orjson.loads(record.read_bytes()))
    return DemoRun(result, out)


@pytest.fixture(scope="session")
def app_workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("appwork")


@pytest.fixture(scope="session")
def report_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("report")
