"""`traceq demo`: the bundled sample_traces/ ingested, one dataset per scenario, and summarised."""

from __future__ import annotations

from pathlib import Path

import click

from traceq.cli.common import Failure

SAMPLE_TRACES = Path(__file__).resolve().parents[2] / "sample_traces"


@click.command("demo")
@click.option("-o", "--output", "dataset", default=None,
              help="Directory for the datasets (default: a fresh temporary one).")  # fmt: skip
def demo_cmd(dataset: str | None) -> None:
    """Ingest the bundled sample_traces/ (one dataset per scenario) and summarise them."""
    import tempfile

    from traceq.dataset import DatasetError
    from traceq.demo import run_demo
    from traceq.ingest import InputError

    if not SAMPLE_TRACES.is_dir():
        raise Failure(f"{SAMPLE_TRACES} not found (run from a source checkout)")
    root = Path(dataset or tempfile.mkdtemp(prefix="traceq-demo-"))
    try:
        run_demo(SAMPLE_TRACES, root, click.echo)
    except (InputError, DatasetError) as exc:
        raise Failure(str(exc)) from exc
