"""Regenerate sample_traces/ bit for bit: `python -m traceq.synth.samples [DIR]`
(`make sample-traces`). Every sample scenario with seed 1, one directory each."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from traceq.synth import SAMPLE_SCENARIOS, generate

SEED = 1


def regenerate(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for name in SAMPLE_SCENARIOS:
        target = root / name
        if target.exists():
            shutil.rmtree(target)
        labels = generate(name, target, seed=SEED)
        t = labels["truth"]
        print(f"{name}: {t['requests']} requests, {t['output_tokens']} output tokens")


if __name__ == "__main__":
    regenerate(Path(sys.argv[1] if len(sys.argv) > 1 else "sample_traces"))
