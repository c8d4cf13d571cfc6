"""The `traceq` command line. Exit codes: 0 ok, 1 findings / regression, 2 usage or input error.

Imports of the stack (polars, DuckDB, the readers) happen inside the commands, and commands
in `LAZY_COMMANDS` are imported when run: `traceq --version` and `--help` start fast.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import click

from traceq.cliutil import Failure

if TYPE_CHECKING:
    from traceq.ingest import IngestResult

PROGRESS_MIN_BYTES = 16 << 20  # show a progress bar for inputs at least this large
SAMPLE_TRACES = Path(__file__).resolve().parent.parent / "sample_traces"


# name → "module:attribute" of commands imported only when run (or listed by --help).
LAZY_COMMANDS = {
    "sql": "traceq.cli_sql:sql_cmd",
    "schema": "traceq.cli_sql:schema_cmd",
    "diagnose": "traceq.cli_diagnose:diagnose_cmd",
    "explain": "traceq.cli_diagnose:explain_cmd",
    "playbooks": "traceq.cli_diagnose:playbooks_cmd",
    "app": "traceq.cli_app:app_cmd",
    "export": "traceq.cli_app:export_cmd",
    "report": "traceq.cli_report:report_cmd",
}
MAX_LINE_BYTES = 32 << 20
MAX_DOCUMENT_BYTES = 256 << 20
"""Defaults of `--max-line-bytes` / `--max-document-bytes`; traceq/ingest/blocks.py holds the
same (a test keeps them equal) so that `traceq --help` imports no reader."""


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS and cmd_name not in self.commands:
            module, attr = LAZY_COMMANDS[cmd_name].split(":")
            self.add_command(getattr(importlib.import_module(module), attr), cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="traceq")
def cli() -> None:
    """Offline trace analysis for LLM inference serving."""


def _input_size(paths: tuple[str, ...]) -> int:
    total = 0
    for p in map(Path, paths):
        files = p.rglob("*") if p.is_dir() else [p]
        total += sum(f.stat().st_size for f in files if f.is_file())
    return total


@cli.command("ingest")
@click.argument("sources", nargs=-1, required=True)
@click.option("-o", "--output", "dataset", required=True, help="Dataset directory (created).")
@click.option(
    "--format",
    "fmt",
    default="auto",
    show_default=True,
    help="Input format; `traceq formats` lists them.",
)
@click.option("--token-event", default="gen_ai.token", show_default=True,
              help="Span event name of one streamed chunk.")  # fmt: skip
@click.option("--year", type=int, help="Year for log timestamps that print none.")
@click.option("--tz", default="UTC", show_default=True, help="Time zone of local timestamps.")
@click.option("--t0", type=int, help="Anchor (ns since epoch) for relative clocks.")
@click.option("--start", help="Time of the first sample of clockless files (dmon, dcgmi dmon, "
              "a single scrape): ISO-8601 (naive = --tz) or ns since epoch.")  # fmt: skip
@click.option("--interval", "interval_s", type=float,
              help="Sampling interval (s) of clockless files [default: 1].")  # fmt: skip
@click.option("--columns", help="Field list of a headerless nvidia-smi CSV, comma-separated "
              "(the --query-gpu value).")  # fmt: skip
@click.option("--instance", help="Label the rows' `instance` (serving instance) column.")
@click.option("--host", help="Label the rows' `host` column (GPU telemetry).")
@click.option("--replace", is_flag=True, help="Read files already in the dataset again (e.g. "
              "with another --year) and drop their old rows in the same commit.")  # fmt: skip
@click.option("--max-line-bytes", type=click.IntRange(min=1), default=MAX_LINE_BYTES,
              show_default=True, help="Longest line (or JSON document) held in memory; "
              "longer ones are quarantined unread.")  # fmt: skip
@click.option("--max-document-bytes", type=click.IntRange(min=1), default=MAX_DOCUMENT_BYTES,
              show_default=True, help="Largest file of a format parsed whole (load-test JSON "
              "exports, Jaeger); parsing takes ~12x its size in memory.")  # fmt: skip
@click.option("--memory-limit", help="DuckDB memory limit of the ingest's out-of-core steps "
              "(second pass, layout, request pick), e.g. 2GB; beyond it they spill to disk "
              "[default: 512MB; the GPU pivot 256MB].")  # fmt: skip
def ingest_cmd(
    sources: tuple[str, ...],
    dataset: str,
    fmt: str,
    token_event: str,
    year: int | None,
    tz: str,
    t0: int | None,
    start: str | None,
    interval_s: float | None,
    columns: str | None,
    instance: str | None,
    host: str | None,
    replace: bool,
    max_line_bytes: int,
    max_document_bytes: int,
    memory_limit: str | None,
) -> None:
    """Ingest trace, log and telemetry files (directories recurse) into DATASET."""
    from traceq.dataset import DatasetError
    from traceq.ingest import IngestOptions, InputError, formats, ingest
    from traceq.ingest.otel.spans import SpanConventions

    if interval_s is not None and interval_s <= 0:
        raise Failure(f"--interval must be positive, got {interval_s}")
    options = IngestOptions(
        conventions=SpanConventions(token_event=token_event),
        year=year,
        tz=tz,
        t0=t0,
        start=_start_ns(start, tz) if start else None,
        interval_s=interval_s,
        columns=tuple(c.strip() for c in columns.split(",")) if columns else None,
        instance=instance,
        host=host,
        max_line_bytes=max_line_bytes,
        max_document_bytes=max_document_bytes,
        memory_limit=memory_limit,
    )
    if fmt != "auto" and fmt not in formats():
        raise Failure(f"unknown format {fmt!r}; run `traceq formats`")
    try:
        total = _input_size(sources)
    except OSError as exc:
        raise Failure(str(exc)) from exc
    show = total >= PROGRESS_MIN_BYTES and sys.stderr.isatty()
    with contextlib.ExitStack() as stack:
        update: Callable[[int], None] = lambda _: None  # noqa: E731
        if show:
            update = stack.enter_context(
                click.progressbar(length=total, label="ingesting", file=sys.stderr)
            ).update
        try:
            results = ingest(
                sources, dataset, fmt=fmt, options=options, progress=update, replace=replace
            )
        except (InputError, DatasetError) as exc:
            raise Failure(str(exc)) from exc
    _print_results(results)
    failed = [r for r in results if r.status == "failed"]
    if failed:
        raise Failure(f"{len(failed)} file(s) could not be read; their error is in quarantine")
    wrong = [r for r in results if r.status == "wrong format"]
    if wrong:
        raise Failure(f"{len(wrong)} file(s) not read: --format {fmt} does not fit them")


def _start_ns(value: str, tz: str) -> int:
    """`--start`: ns since the epoch, or an ISO-8601 time (naive means time zone `tz`)."""
    if value.strip().lstrip("-").isdigit():
        return int(value)
    try:
        when = datetime.fromisoformat(value.strip())
        if when.tzinfo is None:
            when = when.replace(tzinfo=ZoneInfo(tz))
    except (ValueError, KeyError, ZoneInfoNotFoundError) as exc:
        raise Failure(f"--start {value!r}: not an ISO-8601 time or ns integer ({exc})") from exc
    return int(when.timestamp()) * 1_000_000_000 + when.microsecond * 1_000


def _print_results(results: list[IngestResult]) -> None:
    for r in results:
        rows = ", ".join(f"{n:,} {t}" for t, n in r.rows.items()) or "no rows"
        if r.status == "already ingested":
            click.echo(
                f"{r.path}: already ingested (source {r.source_id}), skipped "
                "(--replace reads it again with these options)"
            )
        elif r.status == "failed":
            click.echo(f"{r.path}: {r.format} reader failed; listed in quarantine")
        elif r.status == "wrong format":
            click.echo(f"{r.path}: not ingested", err=True)
        elif r.status in ("unreadable", "skipped"):
            listed = "; listed in quarantine" if r.status == "unreadable" else ", skipped"
            click.echo(f"{r.path}: {r.detail}{listed}")
        elif r.status == "unrecognised":
            click.echo(f"{r.path}: not a format traceq reads; listed in quarantine")
        else:
            replaced = " (replaces its earlier rows)" if r.status == "replaced" else ""
            click.echo(f"{r.path}: {r.format}: {rows}; {r.quarantined:,} quarantined{replaced}")
            if r.conventions:
                seen = ", ".join(f"{k} ({n:,})" for k, n in r.conventions.items())
                click.echo(f"  conventions matched: {seen}")
        if r.assumptions:
            said = "; ".join(f"{k}: {v}" for k, v in r.assumptions.items())
            click.echo(f"  clock ({r.clock_domain}): {said}")
        for warning in r.warnings:
            level = "error" if r.status == "wrong format" else "warning"
            click.echo(f"{level}: {r.path.name}: {warning}", err=True)
    totals: dict[str, int] = {}
    for r in results:
        for t, n in r.rows.items():
            totals[t] = totals.get(t, 0) + n
    quarantined = sum(r.quarantined for r in results)
    summary = ", ".join(f"{n:,} {t}" for t, n in totals.items()) or "no new rows"
    click.echo(f"total: {summary}; {quarantined:,} quarantined")


@cli.command("formats")
def formats_cmd() -> None:
    """List the input formats `traceq ingest --format` accepts."""
    from traceq.ingest import formats
    from traceq.ingest.otel import PRODUCERS

    for name, doc in formats().items():
        click.echo(f"{name:16} {doc}")
    click.echo("\nOpenTelemetry producer conventions (any of the OTel formats above):")
    for name, doc in PRODUCERS.items():
        click.echo(f"  {name:20} {doc}")


@cli.command("demo")
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


@cli.command("synth")
@click.argument("scenario")
@click.option("-o", "--output", "out_dir", help="Output directory (created; not for `list`).")
@click.option("--seed", type=int, default=1, show_default=True, help="Random seed.")
@click.option("--requests", type=int, help="Number of requests (default: the scenario's).")
@click.option("--duration", type=float, help="Arrival span in seconds (rescales the rate).")
@click.option("--convention", default="traceq", show_default=True,
              help="OTel producer convention of the traces (`traceq synth list`).")  # fmt: skip
@click.option(
    "--intensity",
    type=click.Choice(["mild", "medium", "strong"]),
    help="Fault strength (default: strong, as in sample_traces/).",
)
@click.option(
    "--window",
    metavar="START:END",
    help="Confine the fault to START–END seconds after the first arrival of a longer healthy run.",
)
@click.option(
    "--hardware",
    default="h100-8b",
    show_default=True,
    help="GPU and model profile (`traceq synth list`): h100-8b, a100-8b, l4-8b, h100x4-70b.",
)
def synth_cmd(
    scenario: str,
    out_dir: str | None,
    seed: int,
    requests: int | None,
    duration: float | None,
    convention: str,
    intensity: str | None,
    window: str | None,
    hardware: str,
) -> None:
    """Simulate SCENARIO and write its traces, log, GPU samples and labels.json to -o.

    `traceq synth list` shows the scenarios. The same seed writes identical bytes.
    """
    from traceq.synth import CONVENTIONS, SCENARIOS, generate
    from traceq.synth.hardware import PROFILES

    if scenario == "list":
        for name, sc in SCENARIOS.items():
            click.echo(f"{name:22} {sc.description}")
        click.echo("\nconventions (--convention):")
        for name, doc in CONVENTIONS.items():
            click.echo(f"  {name:20} {doc}")
        click.echo("\nhardware (--hardware):")
        for name, profile in PROFILES.items():
            click.echo(f"  {name:20} {profile.description}")
        return
    if convention not in CONVENTIONS:
        raise Failure(f"unknown convention {convention!r}; run `traceq synth list`")
    if scenario not in SCENARIOS:
        raise Failure(f"unknown scenario {scenario!r}; run `traceq synth list`")
    if hardware not in PROFILES:
        raise Failure(f"unknown hardware {hardware!r}; run `traceq synth list`")
    if not out_dir:
        raise click.UsageError("missing option -o / --output")
    if (requests is not None and requests < 1) or (duration is not None and duration <= 0):
        raise click.UsageError("--requests and --duration must be positive")
    span = None
    if window is not None:
        try:
            lo, hi = (float(x) for x in window.split(":"))
        except ValueError:
            raise click.UsageError(f"--window {window!r}: expected START:END in seconds") from None
        span = (lo, hi)
    try:
        labels = generate(
            scenario,
            out_dir,
            seed=seed,
            requests=requests,
            duration_s=duration,
            intensity=intensity,
            window=span,
            convention=convention,
            hardware=hardware,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    t = labels["truth"]
    level = f" ({labels['intensity']})" if labels["intensity"] else ""
    click.echo(
        f"{scenario}{level}: {t['requests']:,} requests, {t['output_tokens']:,} output tokens, "
        f"{t['preemptions']:,} preemptions → {out_dir}"
    )


def main() -> None:
    """Entry point: clean one-line errors instead of tracebacks (TRACEQ_DEBUG=1 shows them)."""
    # SIGTERM (`timeout`, a CI runner, systemd) stops the running query and unwinds, so
    # sessions close and remove their spill directories (traceq/tempdirs.py sweeps the ones
    # a SIGKILL leaves); the exit status is then 128 + the signal, as the shell's would be.
    signal.signal(signal.SIGTERM, _terminated)
    try:
        _main()
    except SystemExit:
        if _SIGNALLED:
            sys.exit(128 + _SIGNALLED[0])
        raise


def _main() -> None:
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        if not _SIGNALLED:  # else the error is the interrupted query's
            exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except BaseException as exc:  # a polars panic is a BaseException
        if _SIGNALLED and _internal(exc):  # the interrupted query's error
            sys.exit(2)
        if not _internal(exc) or os.environ.get("TRACEQ_DEBUG"):
            raise
        click.echo(f"traceq: internal error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(2)
    sys.exit(0)


_SIGNALLED: list[int] = []


def _terminated(signum: int, frame: object) -> None:
    if not _SIGNALLED:
        click.echo("traceq: terminated", err=True)
    _SIGNALLED.append(signum)
    from traceq.session import interrupt_all  # a query under way stops at DuckDB's next check

    interrupt_all()
    sys.exit(128 + signum)


def _internal(exc: BaseException) -> bool:
    """An error of traceq or a library (not Ctrl-C, not SystemExit): one line, no traceback."""
    return isinstance(exc, Exception) or type(exc).__name__ == "PanicException"
