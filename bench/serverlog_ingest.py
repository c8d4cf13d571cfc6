"""vLLM server-log ingest throughput, side by side with a plain Python `re` loop and with
polars reading the same file as lines.

Generates a V1 server log of --lines lines (default 5 M; tests/serverlog_factory.py: stats
lines, request logging with prompt token ids, uvicorn access lines, other INFO lines) under
/tmp, then runs each of these in its own process (so CPU time and peak RSS are its own):

  traceq      traceq.ingest() of the file into a fresh dataset (everything: hash, decode,
              classify, stats, events, requests, Parquet)
  traceq-parse  the same reader with the rows counted instead of written (no hash, no
              Parquet, no requests pass): the stage the Python loop below does
  python-re   a tuned Python loop: one compiled `re` per line kind (the same patterns),
              dispatch on the message start, rows built as tuples, stamps converted through
              a cache (reference a)
  python-re-plain  the straightforward version of that loop: every pattern tried in turn
              with `search`, a `groupdict()` per match, `strptime` per line (reference a')
  polars      pl.read_csv of the file as one string column per line (reference b: the floor
              of any polars-based reader)

and prints lines/s by wall clock and by CPU time, the ratios traceq / reference (higher is
better for traceq), and peak RSS. The machine may be shared: CPU-time ratios are the stabler
figure.

    python bench/serverlog_ingest.py --lines 5000000
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import harness

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BLOCK_LINES = 100  # lines per generated block (tests.serverlog_factory.bench_block)


def generate(path: Path, n_lines: int) -> None:
    from tests.serverlog_factory import bench_block

    t0 = dt.datetime(2025, 3, 1, tzinfo=dt.UTC)
    distinct = ["\n".join(bench_block(t0 + dt.timedelta(minutes=k), k)) + "\n" for k in range(200)]
    with open(path, "w") as fh:
        for i in range(n_lines // BLOCK_LINES):
            fh.write(distinct[i % len(distinct)])


def run_traceq(path: Path) -> dict:
    from traceq.ingest import IngestOptions, ingest

    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        (result,) = ingest([path], Path(tmp) / "ds.tq", options=IngestOptions(year=2025))
    return {"rows": sum(result.rows.values()) + result.quarantined}


class _NullWriter:
    """Counts rows instead of writing them: the parse stage alone."""

    def __init__(self, scratch: Path) -> None:
        self.scratch, self.rows = scratch, 0

    def write(self, table: str, frame) -> None:  # frame: any polars DataFrame
        self.rows += frame.height

    def write_scratch(self, name: str, frame) -> None:
        self.rows += frame.height

    def close(self, name: str | None = None) -> dict:
        return {}

    def scratch_path(self, name: str) -> Path:
        return self.scratch / f"{name}.parquet"  # never written: no second pass


def run_traceq_parse(path: Path) -> dict:
    from traceq.ingest import IngestOptions, serverlog
    from traceq.ingest.source import Source

    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        writer = _NullWriter(Path(tmp))
        serverlog.ingest(Source(path), writer, "vllm-log", IngestOptions(year=2025), lambda _: None)  # type: ignore[arg-type]
    return {"rows": writer.rows}


def run_polars(path: Path) -> dict:
    import polars as pl

    frame = pl.read_csv(
        path, has_header=False, separator="\x1f", quote_char=None, new_columns=["line"],
        schema={"line": pl.String}, encoding="utf8-lossy",
    )  # fmt: skip
    return {"rows": frame.height}


def run_python_re(path: Path) -> dict:
    """The same classification as traceq, one line at a time with Python `re`."""
    from traceq.ingest.serverlog import categories as cg
    from traceq.ingest.serverlog import patterns as p

    prefix = re.compile(p.VLLM_LINE)
    stats = re.compile(p.STATS)
    start = re.compile(cg._START)
    received = re.compile(p.RECEIVED)
    ids = re.compile(p.PROMPT_IDS)
    lifecycle = re.compile(p.LIFECYCLE)
    access = re.compile(p.UVICORN_ACCESS)
    ansi = re.compile(p.ANSI)
    stamps: dict[str, int] = {}
    out: dict[str, list] = {"stats": [], "events": [], "other": []}
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, raw in enumerate(fh, 1):
            line = raw.rstrip("\r\n")
            if "\x1b" in line:
                line = ansi.sub("", line)
            m = prefix.match(line)
            if m is None:
                a = access.match(line)
                if a:
                    out["events"].append((n, "http", float(a["status"]), a["method"], a["path"]))
                else:
                    out["other"].append(n)
                continue
            key = f"{m['mm']}-{m['dd']} {m['hms']}"
            ts = stamps.get(key)
            if ts is None:
                when = dt.datetime.strptime(f"2025-{key}", "%Y-%m-%d %H:%M:%S")
                ts = stamps[key] = int(when.replace(tzinfo=dt.UTC).timestamp()) * 10**9
            msg = m["msg"]
            hit = start.match(msg)
            if hit is None:
                out["other"].append(n)
                continue
            if msg.startswith(("Avg", "Engine", "Throughput")):
                s = stats.match(msg)
                if s:
                    out["stats"].append((
                        ts, n, int(s["engine"] or 0), float(s["prompt_tps"]),
                        float(s["gen_tps"]), int(s["running"]),
                        int(s["waiting"] or s["pending"] or 0), float(s["kv"]) / 100,
                        float(s["prefix"]) / 100 if s["prefix"] else None,
                    ))  # fmt: skip
            elif msg.startswith("Received"):
                r, i = received.match(msg), ids.search(msg)
                count = i["ids"].count(",") + 1 if i and i["ids"] else 0
                out["events"].append((ts, n, "request_received", r and r["req"], count))
            else:
                life = lifecycle.match(msg)
                if life:
                    out["events"].append((ts, n, "request_" + life["what"].lower(), life["req"]))
    return {"rows": sum(len(v) for v in out.values())}


def run_python_re_plain(path: Path) -> dict:
    """The straightforward loop: every pattern tried in turn, a dict per match, strptime."""
    from traceq.ingest.serverlog import events as ev
    from traceq.ingest.serverlog import patterns as p

    prefix, ansi = re.compile(p.VLLM_LINE), re.compile(p.ANSI)
    access = re.compile(p.UVICORN_ACCESS)
    kinds = [
        ("stats", re.compile(p.STATS)),
        ("received", re.compile(p.RECEIVED)),
        ("lifecycle", re.compile(p.LIFECYCLE)),
        ("preemption", re.compile(p.PREEMPT)),
        *((m.name, re.compile(m.pattern)) for m in ev.MILESTONES),
    ]
    ids = re.compile(p.PROMPT_IDS)
    rows: list[tuple] = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, raw in enumerate(fh, 1):
            line = ansi.sub("", raw.rstrip("\r\n"))
            m = prefix.match(line)
            if m is None:
                a = access.match(line)
                rows.append((n, "http", a.groupdict()) if a else (n, "other", None))
                continue
            fields = m.groupdict()
            when = dt.datetime.strptime(f"2025-{fields['mm']}-{fields['dd']} {fields['hms']}",
                                        "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.UTC)  # fmt: skip
            ts = int(when.timestamp()) * 10**9
            for name, rx in kinds:
                hit = rx.search(fields["msg"])
                if hit:
                    got = hit.groupdict()
                    if name == "received":
                        i = ids.search(fields["msg"])
                        got["prompt_tokens"] = i["ids"].count(",") + 1 if i and i["ids"] else 0
                    rows.append((n, ts, name, got))
                    break
            else:
                rows.append((n, ts, "other", None))
    return {"rows": len(rows)}


RUNNERS = {
    "traceq": run_traceq,
    "traceq-parse": run_traceq_parse,
    "python-re": run_python_re,
    "python-re-plain": run_python_re_plain,
    "polars": run_polars,
}


def child(name: str, path: Path) -> None:
    t_wall, t_cpu = time.perf_counter(), time.process_time()
    got = RUNNERS[name](path)
    got |= {
        "wall_s": time.perf_counter() - t_wall,
        "cpu_s": time.process_time() - t_cpu,
    }
    print(json.dumps(got))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=5_000_000)
    ap.add_argument("--dir", default="/tmp/traceq-bench")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--file", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, Path(args.file))
        return
    os.makedirs(args.dir, exist_ok=True)
    path = Path(args.dir) / f"vllm_v1_{args.lines}.log"
    if not path.exists():
        generate(path, args.lines)
    n_lines = args.lines // BLOCK_LINES * BLOCK_LINES
    size = path.stat().st_size / 2**20
    print(f"file: {path} ({n_lines:,} lines, {size:,.0f} MiB)")
    results = {}
    for name in RUNNERS:
        run = harness.run_python([__file__, "--child", name, "--file", str(path)])
        results[name] = json.loads(run.last_line) | {"rss_mib": run.peak_rss_mib}
    print(f"{'reader':16} {'wall s':>8} {'cpu s':>8} {'lines/s wall':>14} {'lines/s cpu':>14} "
          f"{'peak MiB':>9}")  # fmt: skip
    for name, r in results.items():
        print(f"{name:16} {r['wall_s']:8.2f} {r['cpu_s']:8.2f} {n_lines / r['wall_s']:14,.0f} "
              f"{n_lines / r['cpu_s']:14,.0f} {r['rss_mib']:9,.0f}")  # fmt: skip
    for mine in ("traceq", "traceq-parse"):
        tq = results[mine]
        for ref in ("python-re", "python-re-plain", "polars"):
            r = results[ref]
            print(f"{mine} vs {ref}: {r['wall_s'] / tq['wall_s']:.2f}x wall, "
                  f"{r['cpu_s'] / tq['cpu_s']:.2f}x cpu")  # fmt: skip


if __name__ == "__main__":
    main()
