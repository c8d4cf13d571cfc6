"""Detection quality of the playbooks, scored from the synth labels: every fault scenario ×
seeds × mild / medium / strong, whole-run and windowed (the fault confined to a slice of a
longer healthy run), plus `healthy` at the same seeds and lengths. Hardware rotates with the
seed through traceq/synth/hardware.py's profiles (8B on an H100, an A100 and an L4; 70B on
4×H100 with TP 4), so every fault runs on each; healthy runs on every profile at every seed.
Regenerates the part of docs/DETECTION.md between its bench markers.

    python bench/detection.py [--seeds 5] [--seeds-from 11] [--workers 2] [--out DIR]
    python bench/detection.py --seeds-from 21 --doc /tmp/other.md   # other seeds, not the doc
    python bench/detection.py --only long-output-tail --variant windowed --doc /tmp/x.md
    python bench/detection.py --replay /tmp/traceq-detection/results.json   # re-render only

Scoring (labels.json, written by traceq/synth/faults.py): a playbook with status `fail` (an
incident's root) is a TP when it is in the run's `expected_playbooks` and an FP otherwise,
including the `tolerated_playbooks` (true side effects: a consequence that fails beside its
root is a false lead for the reader; the tables count them as "consequence fails"). An
expected playbook found as a `warn` whose root (`see`) is expected too counts as found (it
is folded under that root); one neither failing nor so found is an FN. Other `warn`s are
neither, and are counted. Root first: the first incident's root is an expected playbook.
In a windowed run a TP also needs one of the finding's windows to overlap a label window;
one that fires elsewhere is "mislocated" (FN for recall and FP for precision). Injected
cause first: the finding's first confirmed cause is in `expected_causes[playbook]`, strictly
by id (the synth labels use the playbooks' cause ids; tests/test_synth_labels.py keeps them
in step).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.playbook_helpers import ingest_folder, run  # noqa: E402
from traceq.synth import INTENSITIES, generate  # noqa: E402
from traceq.synth.hardware import PROFILES  # noqa: E402
from traceq.synth.variants import KNOBS  # noqa: E402

DOC = ROOT / "docs" / "DETECTION.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
SEEDS_FROM = 11  # sample_traces/ and the tests use seeds 1–4
REQUESTS = 200  # whole-run size: every fault present at every seed (docs/SYNTH.md, Python API)
LONG_S = 480.0  # windowed runs: 8 min of traffic ...
WINDOW = (240.0, 300.0)  # ... with 1 min of fault in the middle
STARTUP_WINDOW = (0.0, 60.0)  # warm-up happens at startup: its window must start at 0

Job = tuple[str, str, str, int, str, str]  # scenario, variant, intensity, seed, hardware, out
HARDWARE = tuple(PROFILES)


def one(job: Job) -> dict[str, Any]:
    """Generate, ingest and diagnose one run; returns its labels and findings as plain data."""
    name, variant, intensity, seed, hardware, out = job
    folder = Path(out) / f"{name}-{variant}-{intensity}-{seed}-{hardware}"
    shutil.rmtree(folder, ignore_errors=True)
    kw: dict[str, Any] = {"seed": seed, "hardware": hardware}
    if variant == "windowed":
        kw["duration_s"] = LONG_S
        if name != "healthy":
            kw["window"] = STARTUP_WINDOW if name == "warm-up-skew" else WINDOW
    else:
        kw["requests"] = REQUESTS
    if name != "healthy":
        kw["intensity"] = intensity
    labels = generate(name, folder, **kw)
    d = run(ingest_folder(folder, folder.with_suffix(".tq")))
    shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(folder.with_suffix(".tq"), ignore_errors=True)
    findings = [
        {
            "id": f.id,
            "status": f.status,
            "first": next((c.id for c in f.causes if c.status == "confirmed"), None),
            "windows": [[w["start"], w["end"]] for w in f.windows if "start" in w],
            "see": f.see,
        }
        for f in d.findings
        if f.status in ("fail", "warn")
    ]
    return {
        "scenario": name,
        "variant": variant,
        "intensity": intensity,
        "seed": seed,
        "hardware": hardware,
        "requests": labels["truth"]["requests"],
        "expected": labels["expected_playbooks"],
        "tolerated": labels["tolerated_playbooks"],
        "causes": labels["expected_causes"],
        "windows": [[w["start"], w["end"]] for x in labels["faults"] for w in x["windows"]],
        "findings": findings,
        "first_root": d.incidents[0].root if d.incidents else None,
    }


def jobs(
    seeds: int,
    out: str,
    first: int = SEEDS_FROM,
    only: list[str] | None = None,
    variants: tuple[str, ...] = ("whole", "windowed"),
    hardware: tuple[str, ...] = HARDWARE,
) -> list[Job]:
    """Every fault scenario (KNOBS, or `only`) × variant × intensity × seed, on the seed's
    hardware (rotating through `hardware`); then healthy on every profile."""
    names = [n for n in KNOBS if not only or n in only]
    todo: list[Job] = []
    for variant in variants:
        for k, seed in enumerate(range(first, first + seeds)):
            hw = hardware[k % len(hardware)]
            todo += [(n, variant, i, seed, hw, out) for n in names for i in INTENSITIES]
            if not only or "healthy" in only:
                todo += [("healthy", variant, "-", seed, h, out) for h in hardware]
    return todo


def overlaps(a: list[list[int]], b: list[list[int]]) -> bool:
    return any(s1 < e2 and s2 < e1 for s1, e1 in a for s2, e2 in b)


def cause_ok(first: str | None, injected: list[str]) -> bool:
    return first in injected


def score(r: dict[str, Any]) -> dict[str, Any]:
    """One run → per playbook: tp / fp / fn / mislocated / tolerated / warn, and cause-first."""
    fails = {f["id"]: f for f in r["findings"] if f["status"] == "fail"}
    out: dict[str, Any] = {"tp": [], "fp": [], "fn": [], "mis": [], "tol": [], "first": {}}
    out["warn"] = [f["id"] for f in r["findings"] if f["status"] == "warn"]
    for p, f in fails.items():
        if p in r["expected"]:
            if r["variant"] == "windowed" and not overlaps(f["windows"], r["windows"]):
                out["mis"].append(p)
                continue
            out["tp"].append(p)
            out["first"][p] = f["first"]
        else:
            out["fp"].append(p)
            if p in r["tolerated"]:
                out["tol"].append(p)
    warns = {f["id"]: f for f in r["findings"] if f["status"] == "warn"}
    for p in r["expected"]:
        if p in fails:
            continue
        if p in warns and warns[p].get("see") in r["expected"]:
            out["tp"].append(p)
        else:
            out["fn"].append(p)
    return out


def root_first(r: dict[str, Any]) -> bool:
    """The first incident's root is an injected fault's playbook (asked only of runs that
    expect one: a fault a windowed run cannot show, such as fixed lengths, expects none)."""
    return r.get("first_root") in r["expected"]


def pr(tp: int, fp: int, fn: int) -> str:
    p = f"{tp / (tp + fp):.2f}" if tp + fp else "–"
    rc = f"{tp / (tp + fn):.2f}" if tp + fn else "–"
    return f"{p} / {rc}"


def render(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    faults = [r for r in results if r["scenario"] != "healthy"]
    sc = [(r, score(r)) for r in faults]
    playbooks = sorted({p for r in results for p in r["expected"] + r["tolerated"]})
    playbooks += sorted({f["id"] for r in results for f in r["findings"]} - set(playbooks))
    cnt: dict[tuple[str, str, str, str], int] = defaultdict(int)
    for r, s in sc:
        for k in ("tp", "fp", "fn", "mis", "tol", "warn"):
            for p in s[k]:
                cnt[(r["variant"], r["intensity"], p, k)] += 1

    def c(v: str, i: str | None, p: str | None, k: str) -> int:
        return sum(
            n
            for (v2, i2, p2, k2), n in cnt.items()
            if v2 == v and k2 == k and i in (None, i2) and p in (None, p2)
        )

    L = [START, "", f"Run {meta['date']} on commit `{meta['commit']}`: {meta['runs']} runs "]
    L[-1] += f"({meta['seeds']} seeds from {meta.get('seeds_from', SEEDS_FROM)}), "
    L[-1] += f"{meta['workers']} workers, "
    L[-1] += f"{meta['wall_s'] / 60:.1f} min wall on the shared 2-core machine."
    L += ["", "### Whole runs (200 requests): precision / recall per intensity", ""]
    L += [
        "| playbook | "
        + " | ".join(INTENSITIES)
        + " | TP | FP | FN | of which consequence fails | warn |"
    ]
    L += ["|---" * (len(INTENSITIES) + 6) + "|"]
    for p in playbooks:
        cells = [pr(c("whole", i, p, "tp"), c("whole", i, p, "fp"), c("whole", i, p, "fn"))
                 for i in INTENSITIES]  # fmt: skip
        tot = [c("whole", None, p, k) for k in ("tp", "fp", "fn", "tol", "warn")]
        L.append(f"| `{p}` | " + " | ".join(cells) + " | " + " | ".join(map(str, tot)) + " |")
    cells = [pr(c("whole", i, None, "tp"), c("whole", i, None, "fp"), c("whole", i, None, "fn"))
             for i in INTENSITIES]  # fmt: skip
    tot = [c("whole", None, None, k) for k in ("tp", "fp", "fn", "tol", "warn")]
    L.append("| **all** | " + " | ".join(cells) + " | " + " | ".join(map(str, tot)) + " |")

    L += [
        "",
        f"### Windowed runs ({LONG_S / 60:.0f} min, fault in {WINDOW[0]:.0f}–{WINDOW[1]:.0f} s;",
    ]
    L[-1] += f" warm-up-skew {STARTUP_WINDOW[0]:.0f}–{STARTUP_WINDOW[1]:.0f} s)"
    L += ["", "Precision / recall with the window check (a mislocated fail is an FN and an FP);"]
    L += ['"anywhere" is the recall when any fail of the expected playbook counts.', ""]
    L += ["| playbook | " + " | ".join(INTENSITIES) + " | TP | mislocated | FP | FN | anywhere |"]
    L += ["|---" * (len(INTENSITIES) + 6) + "|"]
    for p in [*playbooks, None]:
        cells = []
        for i in INTENSITIES:
            tp, mis = c("windowed", i, p, "tp"), c("windowed", i, p, "mis")
            cells.append(pr(tp, c("windowed", i, p, "fp") + mis, c("windowed", i, p, "fn") + mis))
        tp, mis, fp, fn = (c("windowed", None, p, k) for k in ("tp", "mis", "fp", "fn"))
        any_r = f"{(tp + mis) / (tp + mis + fn):.2f}" if tp + mis + fn else "–"
        name = f"`{p}`" if p else "**all**"
        L.append(f"| {name} | " + " | ".join(cells) + f" | {tp} | {mis} | {fp} | {fn} | {any_r} |")

    L += ["", "### Injected cause first (true positives)", ""]
    L += ["| playbook | injected (labels) | first | first cause when not |"]
    L += ["|---|---|---|---|"]
    first_n = first_ok = 0
    for p in playbooks:
        rows = [(r, s["first"][p]) for r, s in sc if p in s["first"]]
        if not rows:
            continue
        injected = sorted({x for r, _ in rows for x in r["causes"].get(p, [])})
        ok = sum(cause_ok(f, r["causes"].get(p, [])) for r, f in rows)
        wrong = Counter(
            f or "none confirmed" for r, f in rows if not cause_ok(f, r["causes"].get(p, []))
        )
        first_n, first_ok = first_n + len(rows), first_ok + ok
        w = ", ".join(f"{k} {n}" for k, n in wrong.most_common()) or "–"
        L.append(f"| `{p}` | {', '.join(injected)} | {ok}/{len(rows)} | {w} |")
    L.append(f"| **all** | | {first_ok}/{first_n} | |")
    for v in ("whole", "windowed"):
        rows = [(p, r, f) for r, s in sc if r["variant"] == v for p, f in s["first"].items()]
        ok = sum(cause_ok(f, r["causes"].get(p, [])) for p, r, f in rows)
        L.append(f"| all, {v} runs | | {ok}/{len(rows)} | |")

    healthy = [r for r in results if r["scenario"] == "healthy"]
    bad = [r for r in healthy if any(f["status"] == "fail" for f in r["findings"])]
    L += ["", f"### Healthy: {len(bad)} of {len(healthy)} runs with a `fail`", ""]
    for r in bad:
        fired = ", ".join(f["id"] for f in r["findings"] if f["status"] == "fail")
        L.append(f"- {r['variant']} seed {r['seed']} on {r.get('hardware', HARDWARE[0])}: {fired}")
    warned = sum(1 for r in healthy for f in r["findings"] if f["status"] == "warn")
    L.append(f"- warns on healthy: {warned}")

    strong = (c("whole", "strong", None, "tp"), c("whole", "strong", None, "fn"))
    mild = (c("whole", "mild", None, "tp"), c("whole", "mild", None, "fn"))
    tp, fp = c("whole", None, None, "tp"), c("whole", None, None, "fp")
    wtp = c("windowed", None, None, "tp")
    wfp = c("windowed", None, None, "fp") + c("windowed", None, None, "mis")
    ws = [c("windowed", i, None, k) for i in ("strong", "mild") for k in ("tp", "fn", "mis")]

    def ratio(a: int, b: int) -> str:
        return f"{a}/{b} = {a / b:.2f}" if b else "–"

    L += ["", "### Against the targets (computed)", ""]
    L += ["| target | whole runs | windowed | holds (whole / windowed) |", "|---|---|---|---|"]
    rows3 = [
        ("recall ≥ 0.95 at strong", strong[0], sum(strong), ws[0], sum(ws[0:3]), 0.95),
        ("recall ≥ 0.95 at mild", mild[0], sum(mild), ws[3], sum(ws[3:6]), 0.95),
        ("precision ≥ 0.95 (consequence fails count)", tp, tp + fp, wtp, wtp + wfp, 0.95),
    ]
    for t, a, b, wa, wb, lim in rows3:
        h = ["yes" if y and x / y >= lim else "no" for x, y in ((a, b), (wa, wb))]
        L.append(f"| {t} | {ratio(a, b)} | {ratio(wa, wb)} | {h[0]} / {h[1]} |")
    hb = [sum(1 for r in bad if r["variant"] == v) for v in ("whole", "windowed")]
    hn = [sum(1 for r in healthy if r["variant"] == v) for v in ("whole", "windowed")]
    L.append(f"| zero `fail` on healthy | {hb[0]} of {hn[0]} | {hb[1]} of {hn[1]} | "
             f"{'yes' if not hb[0] else 'no'} / {'yes' if not hb[1] else 'no'} |")  # fmt: skip
    ok = first_ok / first_n >= 0.8 if first_n else False
    L.append(
        f"| injected cause first ≥ 0.8 | {ratio(first_ok, first_n)} (both variants) | | "
        f"{'yes' if ok else 'no'} |"
    )

    rf = [
        [root_first(r) for r in faults if r["variant"] == v and r["expected"]]
        for v in ("whole", "windowed")
    ]
    rf_all = [x for v in rf for x in v]
    L.append(
        f"| first incident's root is the injected fault ≥ 0.9 | {ratio(sum(rf[0]), len(rf[0]))} "
        f"| {ratio(sum(rf[1]), len(rf[1]))} | "
        f"{'yes' if rf_all and sum(rf_all) / len(rf_all) >= 0.9 else 'no'} |"
    )

    L += hardware_table(results)
    L += ["", "### Every run", "", "Fails per seed; `!` false positive, `~` consequence, "]
    L[-1] += "`@` mislocated, `(…)` warn, `–` nothing."
    seeds = sorted({r["seed"] for r in results})
    rotation = {r["seed"]: r.get("hardware", HARDWARE[0]) for r in faults}
    heads = [f"{x} ({rotation[x]})" if x in rotation else str(x) for x in seeds]
    L += ["", "| scenario | variant | intensity | " + " | ".join(heads) + " |"]
    L += ["|---" * (3 + len(seeds)) + "|"]

    def label(r: dict[str, Any]) -> str:
        hw = r.get("hardware", HARDWARE[0])
        return f"healthy on {hw}" if r["scenario"] == "healthy" else r["scenario"]

    by = {(label(r), r["variant"], r["intensity"], r["seed"]): r for r in results}
    order = {i: n for n, i in enumerate(INTENSITIES)}
    for key in sorted({k[:3] for k in by}, key=lambda k: (k[0], k[1], order.get(k[2], -1))):
        cells = []
        for seed in seeds:
            r = by.get((*key, seed))
            if r is None:
                cells.append("")
                continue
            s = score(r)
            mark = [p for p in s["tp"]]
            mark += [f"!{'~' if p in s['tol'] else ''}{p}" for p in s["fp"]]
            mark += [f"@{p}" for p in s["mis"]]
            mark += [f"({p})" for p in s["warn"]]
            cells.append(", ".join(mark) or "–")
        L.append(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(cells) + " |")
    return "\n".join([*L, "", END])


def hardware_table(results: list[dict[str, Any]]) -> list[str]:
    """Per hardware profile: fault runs, precision / recall, root first, healthy fails."""
    L = ["", "### Per hardware profile", ""]
    L += [
        "| hardware | fault runs | precision / recall | root first | healthy runs with a `fail` |"
    ]
    L += ["|---|---|---|---|---|"]
    for hw in HARDWARE:
        mine = [r for r in results if r.get("hardware", HARDWARE[0]) == hw]
        faults = [r for r in mine if r["scenario"] != "healthy"]
        scored = [score(r) for r in faults]
        tp = sum(len(x["tp"]) for x in scored)
        fp = sum(len(x["fp"]) + len(x["mis"]) for x in scored)
        fn = sum(len(x["fn"]) + len(x["mis"]) for x in scored)
        asked = [r for r in faults if r["expected"]]
        first = sum(root_first(r) for r in asked)
        healthy = [r for r in mine if r["scenario"] == "healthy"]
        bad = sum(any(f["status"] == "fail" for f in r["findings"]) for r in healthy)
        rf = f"{first}/{len(asked)}" if asked else "–"
        L.append(f"| {hw} | {len(faults)} | {pr(tp, fp, fn)} | {rf} | {bad} of {len(healthy)} |")
    return L


def write_doc(block: str, doc: Path) -> None:
    text = doc.read_text() if doc.exists() else ""
    if START in text and END in text:
        head, rest = text.split(START, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    doc.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--seeds-from", type=int, default=SEEDS_FROM, help="first seed")
    ap.add_argument("--only", nargs="*", help="these scenarios only (and healthy if named)")
    ap.add_argument("--variant", choices=("whole", "windowed"), help="one variant only")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default="/tmp/traceq-detection")
    ap.add_argument("--replay", help="results.json of an earlier run: render it only")
    ap.add_argument("--doc", default=str(DOC))
    a = ap.parse_args()
    if a.replay:
        saved = json.loads(Path(a.replay).read_text())
        results, meta = saved["results"], saved["meta"]
    else:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        variants = (a.variant,) if a.variant else ("whole", "windowed")
        todo = jobs(a.seeds, a.out, a.seeds_from, a.only, variants)
        t0, results = time.monotonic(), []
        with ProcessPoolExecutor(a.workers) as pool:
            futures = [pool.submit(one, j) for j in todo]
            for k, fut in enumerate(as_completed(futures), 1):
                r = fut.result()
                results.append(r)
                fired = ",".join(f["id"] for f in r["findings"] if f["status"] == "fail")
                print(
                    f"[{k}/{len(todo)} {time.monotonic() - t0:4.0f}s] {r['scenario']} "
                    f"{r['variant']} {r['intensity']} {r['seed']} {r['hardware']}: "
                    f"{fired or '-'}",
                    file=sys.stderr,
                    flush=True,
                )
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        )
        meta = {
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": rev.stdout.strip(),
            "runs": len(results),
            "seeds": a.seeds,
            "seeds_from": a.seeds_from,
            "workers": a.workers,
            "wall_s": time.monotonic() - t0,
            "cpus": os.cpu_count(),
        }
        (Path(a.out) / "results.json").write_text(json.dumps({"meta": meta, "results": results}))
    block = render(results, meta)
    write_doc(block, Path(a.doc))
    print(block)


if __name__ == "__main__":
    main()
