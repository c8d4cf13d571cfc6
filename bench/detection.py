"""Detection quality of the playbooks: scenarios × seeds × intensities → precision, recall and
how often the injected cause ranks first. Writes the Markdown tables of docs/DETECTION.md.

    python bench/detection.py [--seeds 5] [--workers 2] [--out /tmp/traceq-detection]

Intensities scale each scenario's fault knob (mild / medium = the scenario as shipped /
strong); they are defined here until `traceq synth --intensity` lands on main, and are
not tuned to the playbooks: each is the shipped value halved / doubled (or the nearest
physically meaningful step). Seeds start at 11, so none is a sample_traces/ seed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.playbook_helpers import ingest_folder, run  # noqa: E402
from traceq.synth import SCENARIOS, generate  # noqa: E402
from traceq.synth.config import Scenario  # noqa: E402

# The injected cause a diagnosis should rank first, per (scenario, playbook).
CAUSE = {
    ("long-output-tail", "long-request-tail"): "long-outputs",
    ("client-jitter", "tbt-jitter"): "client-only",
    ("prefill-interference", "prefill-interference"): "chunked-prefill-off",
    ("prefill-interference", "tbt-jitter"): "prefill-interference",
    ("kv-pressure", "kv-pressure"): "kv-budget-small",
    ("queue-overload", "ttft-queueing"): "arrival-burst",
    ("slow-tokenizer", "tokenizer-overhead"): "slow-tokenizer",
    ("warm-up-skew", "warm-up-skew"): "right-after-startup",
    ("gpu-throttle", "slow-decode"): "gpu-throttle",
    ("fixed-length", "unrealistic-load"): "fixed-prompts",
    ("errors", "error-rate"): "timeouts",
    ("low-prefix-reuse", "ttft-prefill"): "prefix-cache-off",
}


def _faults(sc: Scenario, **kw: object) -> Scenario:
    return replace(sc, faults=replace(sc.faults, **kw))


def _engine(sc: Scenario, **kw: object) -> Scenario:
    return replace(sc, engine=replace(sc.engine, **kw))


# scenario → intensity → how to scale the shipped scenario (medium = as shipped)
SCALE = {
    "long-output-tail": lambda s, k: _faults(s, long_output_fraction=0.04 * k),
    "client-jitter": lambda s, k: _faults(s, client_stall_prob=0.03 * k),
    "prefill-interference": lambda s, k: _faults(s, long_prompt_fraction=min(0.12 * k, 0.3)),
    # A KV budget below the longest prompt never admits it (the simulator waits forever),
    # so kv-pressure scales the load on the shipped 5 k-token cache instead.
    "kv-pressure": lambda s, k: replace(s, workload=replace(s.workload, rate_per_s=1.6 * k)),
    "queue-overload": lambda s, k: _faults(s, overload_factor=1 + 14 * k),
    "slow-tokenizer": lambda s, k: _faults(s, tokenizer_slowdown=100.0 * k),
    "warm-up-skew": lambda s, k: _engine(s, warmup_factor=1 + 4 * k),
    "gpu-throttle": lambda s, k: _faults(
        s, throttle_factor=1 + 0.8 * k, throttle_clock_mhz=int(1980 / (1 + 0.8 * k))
    ),
    "errors": lambda s, k: _faults(s, error_fraction=0.05 * k),
}
INTENSITY = {"mild": 0.5, "medium": 1.0, "strong": 2.0}
RUN = ("mild", "strong")  # medium is the scenario as shipped (sample_traces/, tests)


def one(job: tuple[str, str, int, str]) -> tuple[str, str, int, list[str], dict[str, str]]:
    name, intensity, seed, out = job
    sc = SCENARIOS[name]
    if name in SCALE:
        sc = SCALE[name](sc, INTENSITY[intensity])
    folder = Path(out) / f"{name}-{intensity}-{seed}"
    shutil.rmtree(folder, ignore_errors=True)
    generate(sc, folder, seed=seed)
    d = run(ingest_folder(folder, folder.with_suffix(".tq")))
    fired = [f.id for f in d.findings if f.status == "fail"]
    first = {
        f.id: next((c.id for c in f.causes if c.status == "confirmed"), "-")
        for f in d.findings
        if f.status == "fail"
    }
    shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(folder.with_suffix(".tq"), ignore_errors=True)
    return name, intensity, seed, fired, first


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default="/tmp/traceq-detection")
    a = ap.parse_args()
    names = [n for n in SCENARIOS if n != "large"]
    jobs = [
        (n, i, seed, a.out)
        for n in names
        for i in (RUN if n in SCALE else ["medium"])
        for seed in range(11, 11 + a.seeds)
    ]
    Path(a.out).mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(a.workers) as pool:
        results = list(pool.map(one, jobs))
    report(results)


def report(results: list[tuple[str, str, int, list[str], dict[str, str]]]) -> None:
    expected = {n: set(sc.expected_playbooks) for n, sc in SCENARIOS.items()}
    tp, fp, fn, first_ok, first_n = (defaultdict(int) for _ in range(5))
    by_intensity: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    playbooks = sorted({p for e in expected.values() for p in e})
    for name, intensity, _seed, fired, first in results:
        for p in playbooks:
            hit, want = p in fired, p in expected[name]
            tp[p] += hit and want
            fp[p] += hit and not want
            fn[p] += want and not hit
            if want:
                by_intensity[intensity][0] += hit
                by_intensity[intensity][1] += 1
            if hit and want and (name, p) in CAUSE:
                first_n[p] += 1
                first_ok[p] += first.get(p) == CAUSE[(name, p)]
    print("| playbook | TP | FP | FN | precision | recall | injected cause first |")
    print("|---|---|---|---|---|---|---|")
    for p in playbooks:
        prec = tp[p] / (tp[p] + fp[p]) if tp[p] + fp[p] else float("nan")
        rec = tp[p] / (tp[p] + fn[p]) if tp[p] + fn[p] else float("nan")
        cf = f"{first_ok[p]}/{first_n[p]}" if first_n[p] else "-"
        print(f"| `{p}` | {tp[p]} | {fp[p]} | {fn[p]} | {prec:.2f} | {rec:.2f} | {cf} |")
    print("\n| intensity | recall (expected playbook fired) |\n|---|---|")
    for i in INTENSITY:
        hit, n = by_intensity[i]
        print(f"| {i} | {hit}/{n} = {hit / n:.2f} |" if n else f"| {i} | - |")
    healthy = [(seed, fired) for name, _i, seed, fired, _ in results if name == "healthy"]
    print(f"\nhealthy: {sum(1 for _, f in healthy if f)} of {len(healthy)} runs with a `fail`")
    for seed, fired in healthy:
        if fired:
            print(f"  seed {seed}: {', '.join(fired)}")
    print("\n| scenario | intensity | seed | fired |\n|---|---|---|---|")
    for name, intensity, seed, fired, _ in sorted(results):
        print(f"| {name} | {intensity} | {seed} | {', '.join(fired) or '-'} |")


if __name__ == "__main__":
    main()
