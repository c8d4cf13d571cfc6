"""`traceq demo`: ingest each scenario of sample_traces/ into its own dataset and print what
traceq can say about it: the phase and KPI summary, then the playbooks' findings (with the
cause ranked first) next to the playbooks the scenario's labels.json expects."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
import polars as pl

from traceq.dataset import Dataset
from traceq.ingest import IngestOptions, InputError, ingest
from traceq.playbooks import diagnose, load_catalog
from traceq.playbooks.words import count, duration_ms
from traceq.render import render_frame
from traceq.session import Session
from traceq.sql import load

LABELS = "labels.json"


def scenario_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / LABELS).is_file())


def ingest_scenario(
    folder: Path, target: Path, echo: Callable[[str], None], options: IngestOptions
) -> None:
    """Ingest every file of a scenario that an ingester recognises; say which are skipped."""
    for f in sorted(folder.iterdir()):
        if f.name == LABELS or not f.is_file():
            continue
        try:
            for r in ingest([f], target, options=options):
                rows = ", ".join(f"{n:,} {t}" for t, n in r.rows.items()) or "no new rows"
                echo(f"  {f.name}: {r.format}: {rows}; {r.quarantined:,} quarantined")
        except InputError:
            echo(f"  {f.name}: no ingester for this format yet, skipped")


def run_demo(root: Path, out: Path, echo: Callable[[str], None]) -> pl.DataFrame:
    """Ingest every scenario under `root` into `out/<scenario>.tq`; print and return the summary."""
    rows, found = [], []
    playbooks = load_catalog().playbooks
    for folder in scenario_dirs(root):
        labels = orjson.loads((folder / LABELS).read_bytes())
        target = out / f"{folder.name}.tq"
        echo(f"{folder.name}: {labels['description']}")
        # Log lines print no year or zone: labels.json says which the generator used.
        clock = labels["clock"]
        options = IngestOptions(year=clock["log_year"], tz=clock["log_timezone"])
        ingest_scenario(folder, target, echo, options)
        with Session(Dataset(target)) as session:
            summary = session.query(load("demo_summary")).to_dicts()[0]
            diagnosis = diagnose(session, playbooks)
        failed = [f for f in diagnosis.findings if f.status == "fail"]
        found.append(
            {
                "scenario": folder.name,
                "expected": ", ".join(labels["expected_playbooks"]) or "-",
                "findings": ", ".join(f.id for f in failed) or "-",
                "first finding's top cause": next(
                    (c.id for f in failed[:1] for c in f.causes[:1] if c.status == "confirmed"),
                    "-",
                ),
            }
        )
        rows.append(
            {
                "scenario": folder.name,
                **summary,
                "expected": ", ".join(labels["expected_playbooks"]) or "-",
            }
        )
    frame = pl.DataFrame(rows)
    echo(f"\ndatasets: {out}\n\nper scenario (quantiles over requests; shares of all e2e time)")
    echo(render_frame(human(frame), "table").rstrip("\n"))
    echo("\nfindings per scenario (traceq diagnose; worst first) beside the labels")
    echo(render_frame(pl.DataFrame(found), "table").rstrip("\n"))
    first = scenario_dirs(root)[0].name if rows else "healthy"
    echo(f'\nnext: traceq sql {out / (first + ".tq")} "SELECT * FROM kpi_latency"')
    echo(f"      traceq diagnose {out / 'kv-pressure.tq'}")
    return frame


_HEADINGS = {
    "ttft_p50": "TTFT p50",
    "ttft_p99": "TTFT p99",
    "tpot_p50": "TPOT p50",
    "tbt_p99": "TBT p99",
    "e2e_p50": "e2e p50",
    "e2e_p99": "e2e p99",
    "tokenize_share": "tokenize",
    "queue_share": "queue",
    "prefill_share": "prefill",
}


def human(frame: pl.DataFrame) -> pl.DataFrame:
    """The demo's summary as a person reads it: counts with separators, durations in the unit
    they read in (`duration_ms`), shares of e2e time in percent; a missing figure is `-`.

    >>> human(pl.DataFrame({"requests": [1234], "ttft_p99": [15639.6], "queue_share": [0.799]}))
    shape: (1, 3)
    ┌──────────┬──────────┬────────┐
    │ requests ┆ TTFT p99 ┆ queue  │
    │ ---      ┆ ---      ┆ ---    │
    │ str      ┆ str      ┆ str    │
    ╞══════════╪══════════╪════════╡
    │ 1,234    ┆ 16 s     ┆ 79.9 % │
    └──────────┴──────────┴────────┘
    """

    def text(column: str, value: object) -> object:
        if value is None or not isinstance(value, int | float):
            return "-" if value is None else value
        if column.endswith("_share"):
            return f"{value * 100:.1f} %"
        if column in _HEADINGS:
            return duration_ms(value)
        return count(value)

    return pl.DataFrame(
        [
            {_HEADINGS.get(c, c): text(c, v) for c, v in row.items()}
            for row in frame.iter_rows(named=True)
        ],
        schema=[_HEADINGS.get(c, c) for c in frame.columns],
    )
