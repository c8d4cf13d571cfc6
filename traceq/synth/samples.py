"""Regenerate sample_traces/ bit for bit: `python -m traceq.synth.samples [DIR]`
(`make sample-traces`). Every sample scenario with seed 1, one directory each, and the
routed, disaggregated deployments of `DEPLOYMENTS`."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from traceq.synth import SAMPLE_SCENARIOS, generate

SEED = 1
DEPLOYMENTS = {"disaggregated": ("healthy", "dynamo")}
"""Sample folders of a routed, disaggregated deployment (traceq/synth/write_disagg.py):
folder → (scenario of its traffic, producer convention)."""
SAMPLE_FOLDERS = (*SAMPLE_SCENARIOS, *DEPLOYMENTS)
"""Every folder of sample_traces/."""


def regenerate(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for name in SAMPLE_SCENARIOS:
        target = root / name
        if target.exists():
            shutil.rmtree(target)
        labels = generate(name, target, seed=SEED)
        t = labels["truth"]
        print(f"{name}: {t['requests']} requests, {t['output_tokens']} output tokens")
    for folder, (name, convention) in DEPLOYMENTS.items():
        target = root / folder
        if target.exists():
            shutil.rmtree(target)
        labels = generate(name, target, seed=SEED, convention=convention)
        print(f"{folder}: {labels['disagg']['served']} requests served by {convention}")


if __name__ == "__main__":
    regenerate(Path(sys.argv[1] if len(sys.argv) > 1 else "sample_traces"))
