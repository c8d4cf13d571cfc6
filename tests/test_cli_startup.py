"""`traceq --version` does not import the stack, `--help` not the readers; `traceq synth list`
needs no -o."""

from __future__ import annotations

import subprocess
import sys

import pytest

from traceq.schema import SCHEMA_VERSION

PROBE = """
import sys
import traceq.cli
sys.argv = ["traceq", *sys.argv[1:]]
try:
    traceq.cli.main()
except SystemExit:
    pass
print(sorted(m for m in ("polars", "duckdb", "pyarrow", "traceq.ingest") if m in sys.modules))
"""


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--version"], "[]"),
        # the command list shows `sql`'s help line: its module, not the readers
        (["--help"], "['duckdb', 'polars', 'pyarrow']"),
    ],
)
def test_startup_imports_nothing_heavy(args: list[str], expected: str) -> None:
    run = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=True
    )
    assert run.stdout.strip().splitlines()[-1] == expected


def test_synth_list_needs_no_output() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "traceq", "synth", "list"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert "kv-pressure" in run.stdout and "healthy" in run.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "traceq", "synth", "healthy"], capture_output=True, text=True
    )
    assert missing.returncode == 2 and "-o / --output" in missing.stderr


def test_package_names_stay_lazy_and_right() -> None:
    code = (
        "import sys, traceq; assert 'polars' not in sys.modules; import traceq.ingest.source;"
        "print(callable(traceq.ingest), traceq.SCHEMA_VERSION, traceq.Session.__name__)"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.split() == ["True", str(SCHEMA_VERSION), "Session"]
