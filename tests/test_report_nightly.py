"""docs/report-nightly.sh as a cron job runs it: the first night becomes the baseline, a later
night with a fault fails the job with exit 1, and every night lands in the trend."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from traceq.synth import generate

SCRIPT = Path(__file__).resolve().parent.parent / "docs" / "report-nightly.sh"


def _night(run: Path, state: Path, date: str) -> subprocess.CompletedProcess:
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "NIGHTLY_DATE": date, "PATH": path}
    return subprocess.run(["bash", str(SCRIPT), str(run), str(state)], env=env,
                          capture_output=True, text=True, timeout=600, check=False)  # fmt: skip


def test_nightly_script_gates_and_keeps_a_trend(tmp_path):
    state = tmp_path / "nightly"
    for name, seed in (("healthy", 1), ("queue-overload", 1)):
        generate(name, tmp_path / name, seed=seed)
        (tmp_path / name / "labels.json").unlink()  # not a load-test output
    first = _night(tmp_path / "healthy", state, "2025-06-14")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "becomes the baseline" in first.stdout
    assert (state / "baselines" / "main.json").exists()
    second = _night(tmp_path / "queue-overload", state, "2025-06-15")
    assert second.returncode == 1, second.stdout + second.stderr
    assert "REGRESSED ttft_p95_ms" in second.stdout
    assert (state / "reports" / "2025-06-15.html").stat().st_size > 10_000
    trend = second.stdout.split("trend of the main KPIs")[1]
    assert "2025-06-14" in trend and "2025-06-15" in trend
