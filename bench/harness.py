"""One way to run a benchmark child and measure it: wall time seen by the parent, peak RSS
(VmHWM) of the child's own address space, its standard output.

Every bench script runs each reader in a fresh process through `run_python`, so figures are
comparable across scripts. VmHWM, not `ru_maxrss`: the latter is carried over fork + exec,
so a child spawned by a large parent would report the parent's peak.

    from harness import run_python
    child = run_python(["-c", "import traceq, sys; traceq.ingest([sys.argv[1]], sys.argv[2])",
                        src, out])
    child.seconds, child.peak_rss_mib, child.stdout
"""

from __future__ import annotations

import atexit
import os
import runpy
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

_HWM_ENV = "TRACEQ_BENCH_HWM"


@dataclass(frozen=True)
class Child:
    seconds: float
    peak_rss_mib: float
    stdout: str

    @property
    def last_line(self) -> str:
        """The last line the child printed (where children put their JSON result)."""
        lines = self.stdout.strip().splitlines()
        return lines[-1] if lines else ""


def peak_rss_mib() -> float:
    """This process's peak resident set (VmHWM) in MiB."""
    with open("/proc/self/status") as fh:
        kib = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM"))
    return kib / 1024


def run_python(args: list[str], timeout: float | None = None) -> Child:
    """Run `python ARGS…` (`-c CODE …` or `SCRIPT …`) in a fresh process; raise on failure."""
    with tempfile.NamedTemporaryFile(prefix="traceq-hwm-", dir="/tmp") as hwm:
        env = {**os.environ, _HWM_ENV: hwm.name}
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, __file__, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        seconds = time.perf_counter() - start
        if done.returncode:
            msg = f"child {args[:2]} exited {done.returncode}: {done.stderr[-2000:]}"
            raise RuntimeError(msg)
        return Child(seconds, float(Path(hwm.name).read_text()), done.stdout)


def _child_main() -> None:
    """In the child: record VmHWM at exit, then run the code or script as `python` would."""
    out = os.environ[_HWM_ENV]
    atexit.register(lambda: Path(out).write_text(f"{peak_rss_mib():.1f}"))
    args = sys.argv[1:]
    if args[0] == "-c":
        sys.argv = ["-c", *args[2:]]
        exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__"})
    else:
        sys.argv = args
        sys.path.insert(0, str(Path(args[0]).resolve().parent))
        runpy.run_path(args[0], run_name="__main__")


if __name__ == "__main__" and _HWM_ENV in os.environ:
    _child_main()
