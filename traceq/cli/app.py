"""`traceq app` (the Streamlit postmortem app) and `traceq export` (a window of a dataset as a
trace the Perfetto UI opens)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from traceq.cli.common import Failure, checked_gpu
from traceq.remote import is_url
from traceq.session import QueryError, Session

ENTRY = Path(__file__).resolve().parents[1] / "app" / "streamlit_app.py"


@click.command("app")
@click.argument("dataset", required=False)
@click.option(
    "--findings",
    type=click.Path(exists=True, dir_okay=False),
    help="Show the findings of this JSON (`traceq diagnose --format json`) instead "
    "of running the playbooks.",
)
@click.option(
    "--gpu",
    "gpu_name",
    metavar="NAME",
    help="The GPU the run served on, for the playbooks' GPU-scaled floors, where the data "
    "names none or the wrong one (as `traceq diagnose --gpu`).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to serve on (loopback: only this machine).",
)
@click.option("--port", type=int, default=8501, show_default=True)
@click.option(
    "--browser/--no-browser", default=False, show_default=True, help="Open a web browser on start."
)
def app_cmd(
    dataset: str | None,
    findings: str | None,
    gpu_name: str | None,
    host: str,
    port: int,
    browser: bool,
) -> None:
    """Start the postmortem app on DATASET (without one: pick a sample or upload files)."""
    gpu = checked_gpu(gpu_name)
    if dataset is not None:
        try:
            Session(dataset).close()
        except QueryError as exc:
            raise Failure(str(exc)) from exc
    command = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(ENTRY),
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--server.headless",
        "false" if browser else "true",
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",
        "minimal",
        "--",
    ]
    if dataset is not None:
        command.append(dataset if is_url(dataset) else str(Path(dataset).resolve()))
    if findings is not None:
        command += ["--findings", str(Path(findings).resolve())]
    if gpu is not None:
        command += ["--gpu", gpu]
    click.echo(f"traceq app on http://{host}:{port} (Ctrl-C stops it)", err=True)
    # Become the Streamlit server (no child left behind when this process is stopped).
    os.environ["PYTHONUNBUFFERED"] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, command)


@click.command("export")
@click.argument("dataset")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["perfetto"]),
    default="perfetto",
    show_default=True,
    help="Chrome JSON trace, as the Perfetto UI opens it.",
)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    help="Trace file to write ('-' for standard output).",
)
@click.option("--since", help="Window start: ISO-8601 (naive = UTC) or ns since the epoch.")
@click.option("--until", help="Window end (exclusive), same forms as --since.")
def export_cmd(dataset: str, fmt: str, output: str, since: str | None, until: str | None) -> None:
    """Write DATASET (or the window --since … --until) as a trace for ui.perfetto.dev.

    Requests become tracks with their phases as slices and token chunks as instants; engine
    stats and GPU series become counters; events become instants.
    """
    from traceq import perfetto
    from traceq.app.queries import Window, time_range
    from traceq.app.state import parse_ts

    try:
        session = Session(dataset, row_cap=10**12)
    except QueryError as exc:
        raise Failure(str(exc)) from exc
    with session:
        full = time_range(session).full
        if full is None:
            raise Failure(f"{dataset} holds no timed rows to export")
        try:
            lo = parse_ts(since) if since else full.since
            hi = parse_ts(until) if until else full.until
        except ValueError as exc:
            raise Failure(f"--since / --until: {exc}") from exc
        if hi <= lo:
            raise Failure("--until must be later than --since")
        try:
            if output == "-":
                summary = perfetto.write(session, sys.stdout.buffer, Window(lo, hi))
            else:
                with open(output, "wb") as out:
                    summary = perfetto.write(session, out, Window(lo, hi))
        except (QueryError, OSError) as exc:
            raise Failure(str(exc)) from exc
    click.echo(
        f"{summary.requests:,} requests, {summary.tokens:,} token chunks, "
        f"{summary.events:,} trace events → {output} (open it at ui.perfetto.dev)",
        err=True,
    )
