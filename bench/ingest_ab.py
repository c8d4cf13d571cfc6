"""`traceq.ingest` of the same files by two checkouts, alternately, each run in a fresh process.

    python bench/ingest_ab.py FILE... --reference DIR [--runs 4]

DIR is another checkout of traceq (e.g. `git worktree add /tmp/ref <commit>`); this tree is
the other side. Runs alternate (reference first on odd runs, this tree first on even ones) so a
machine whose speed drifts during the run weighs on both alike, which a bench run of one tree
at a time cannot promise on a shared machine. Prints each run's wall seconds and peak RSS
(bench/harness.py), the medians, and this tree's speed as a ratio of the reference's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
from pathlib import Path

from harness import run_python

ROOT = Path(__file__).resolve().parent.parent
_INGEST = (
    "import sys, traceq; assert traceq.__file__.startswith(sys.argv[1]), traceq.__file__; "
    "traceq.ingest(sys.argv[3:], sys.argv[2])"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--reference", type=Path, required=True, help="the other checkout")
    parser.add_argument("--runs", type=int, default=4)
    args = parser.parse_args()
    trees = {"reference": args.reference.resolve(), "this tree": ROOT}
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="traceq-ab-") as tmp:
        for i in range(args.runs):
            for name in list(trees) if i % 2 == 0 else list(trees)[::-1]:
                out = Path(tmp) / "ds"
                os.environ["PYTHONPATH"] = str(trees[name])
                child = run_python(
                    ["-c", _INGEST, str(trees[name]), str(out), *map(str, args.files)]
                )
                runs[name].append((child.seconds, child.peak_rss_mib))
                shutil.rmtree(out, ignore_errors=True)
    for name, got in runs.items():
        listed = ", ".join(f"{s:.2f} s / {m:.0f} MiB" for s, m in got)
        print(f"{name:10} median {statistics.median(s for s, _ in got):6.2f} s   {listed}")
    medians = [statistics.median(s for s, _ in runs[name]) for name in trees]
    print(f"this tree's speed / the reference's: {medians[0] / medians[1]:.2f}x")


if __name__ == "__main__":
    main()
