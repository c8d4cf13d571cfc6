"""The `traceq` command line. Exit codes: 0 ok, 1 findings / regression, 2 usage or input error.

Each command lives in a module of this package (`COMMANDS`), imported when the command runs
or `--help` lists it; imports of the stack (polars, DuckDB, the readers) happen inside the
commands, so `traceq --version` and `--help` start fast. Shared pieces: traceq/cli/common.py.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys

import click

# name → "module:attribute" of every command, imported only when run (or listed by --help).
COMMANDS = {
    "ingest": "traceq.cli.ingest:ingest_cmd",
    "formats": "traceq.cli.ingest:formats_cmd",
    "demo": "traceq.cli.demo:demo_cmd",
    "synth": "traceq.cli.synth:synth_cmd",
    "sql": "traceq.cli.sql:sql_cmd",
    "schema": "traceq.cli.sql:schema_cmd",
    "diagnose": "traceq.cli.diagnose:diagnose_cmd",
    "explain": "traceq.cli.diagnose:explain_cmd",
    "playbooks": "traceq.cli.diagnose:playbooks_cmd",
    "app": "traceq.cli.app:app_cmd",
    "export": "traceq.cli.app:export_cmd",
    "report": "traceq.cli.report:report_cmd",
    "whatif": "traceq.cli.whatif:whatif_cmd",
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            module, attr = COMMANDS[cmd_name].split(":")
            self.add_command(getattr(importlib.import_module(module), attr), cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="traceq")
def cli() -> None:
    """Offline trace analysis for LLM inference serving."""


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
