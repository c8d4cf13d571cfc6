"""Peak RSS of each phase of one `traceq.ingest` call, in-process.

    python bench/ingest_phases.py DATASET FILE... [--memory-limit 512MB] [--json OUT]

Wraps the phase functions (the OTLP first pass and second pass, the second pass's statements
and each of its outputs, the layout's first-chunk file and each table it writes, `tokens` with
all its pieces, the request pick) and, at each phase boundary, reads the process's VmHWM and
resets it (`5` written to /proc/self/clear_refs), so each line is that phase's own peak RSS,
not the running maximum, beside the RSS the process held when the phase began (what the
earlier phases left). Linux only. docs/PERFORMANCE.md, "Ingest peak RSS with size", has the
figures.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import traceq
from traceq import layout, pick
from traceq.ingest import kpis, otel, serverlog
from traceq.ingest.gpu import long as gpu_long

_marks: list[dict[str, Any]] = []
_state: dict[str, Any] = {"phase": "start", "t": time.perf_counter(), "start_mib": 0}


def _status_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _hwm_mib() -> float:
    return _status_mib("VmHWM")


def mark(next_phase: str) -> None:
    """Close the current phase (its own peak RSS and seconds) and start `next_phase`."""
    now = time.perf_counter()
    _marks.append(
        {
            "phase": _state["phase"],
            "s": round(now - _state["t"], 2),
            "start_mib": _state["start_mib"],
            "peak_mib": round(_hwm_mib()),
        }
    )
    Path("/proc/self/clear_refs").write_text("5")
    _state.update(phase=next_phase, t=time.perf_counter(), start_mib=round(_status_mib("VmRSS")))


def _wrap(name: str, fn: Callable[..., Any], after: str) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        mark(name)
        try:
            return fn(*args, **kwargs)
        finally:
            mark(after)

    return wrapped


def _install(keep: Path | None) -> None:
    otel.ingest = _wrap("otel first pass", otel.ingest, "between")
    finalize = otel._finalize

    def kept(writer: Any, schemas: Any) -> None:
        if keep is not None:  # hard links: the files the second pass reads, for replays
            keep.mkdir(parents=True, exist_ok=True)
            for f in writer.scratch.glob("*.parquet"):
                (keep / f.name).hardlink_to(f)
        finalize(writer, schemas)

    otel._finalize = _wrap("otel second pass", kept, "otel first pass (rest)")
    layout.lay_out = _wrap("layout", layout.lay_out, "commit")
    layout._write_days = _wrap_days(layout._write_days)
    layout._write_tokens = _wrap_days(layout._write_tokens)
    pick.settle = _wrap("request pick", pick.settle, "after pick")
    kpis.settle = _wrap("stored KPIs", kpis.settle, "after stored KPIs")
    serverlog.second_pass = _wrap_second_pass("serverlog second pass", serverlog.second_pass)
    gpu_long.second_pass = _wrap_second_pass("gpu second pass", gpu_long.second_pass)
    load = otel.load

    def marked_load(name: str) -> str:
        if name == "otel_finalize":
            mark("second pass: statements")
        return load(name)

    otel.load = marked_load  # type: ignore[attr-defined]
    table = None

    def marked_write(self: Any, tbl: str, frame: Any) -> None:
        nonlocal table
        if _state["phase"].startswith("second pass") and tbl != table:
            table = tbl
            mark(f"second pass: output {tbl}")
        _write(self, tbl, frame)

    def marked_write_view(self: Any, tbl: str, con: Any, view: str) -> None:
        nonlocal table
        if _state["phase"].startswith("second pass") and tbl != table:
            table = tbl
            mark(f"second pass: output {tbl}")
        _write_view(self, tbl, con, view)

    from traceq.writer import SourceWriter

    _write, _write_view = SourceWriter.write, SourceWriter.write_view
    SourceWriter.write = marked_write  # type: ignore[method-assign,assignment]
    SourceWriter.write_view = marked_write_view  # type: ignore[method-assign,assignment]


def _wrap_second_pass(name: str, cm: Callable[..., Any]) -> Callable[..., Any]:
    @contextmanager
    def wrapped(*args: Any, **kwargs: Any) -> Iterator[Any]:
        mark(name)
        try:
            with cm(*args, **kwargs) as con:
                yield con
        finally:
            mark(f"after {name}")

    return wrapped


def _wrap_days(fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(con: Any, table: str, *args: Any) -> Any:
        mark(f"layout: {Path(str(table)).name}")  # a table name, or the folder it is written to
        return fn(con, table, *args)

    return wrapped


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--memory-limit", default=None)
    ap.add_argument("--keep", type=Path, help="hard-link the OTLP staged files here")
    args = ap.parse_args()
    _install(args.keep)
    mark("start")
    t = time.perf_counter()
    options = traceq.IngestOptions(memory_limit=args.memory_limit)
    traceq.ingest(args.files, args.dataset, options=options)
    mark("end")
    total = time.perf_counter() - t
    rows = [m for m in _marks if m["s"] >= 0.05 or m["peak_mib"] > 0]
    print(f"{'phase':<36} {'s':>11} {'peak':>11} {'RSS at start':>13}")
    for m in rows:
        print(f"{m['phase']:<36} {m['s']:>9.2f} s {m['peak_mib']:>7} MiB {m['start_mib']:>9} MiB")
    print(f"{'total':<36} {total:>9.2f} s {max(m['peak_mib'] for m in rows):>7} MiB")
    if args.json:
        args.json.write_text(json.dumps({"total_s": total, "phases": rows}, indent=1))


if __name__ == "__main__":
    main()
