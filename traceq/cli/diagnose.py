"""`traceq diagnose`, `traceq explain` and `traceq playbooks list|lint`: the playbook engine
on the command line (traceq/playbooks/; renderers in traceq/playbooks/render.py).

Exit codes: 0 when no incident at or above `--fail-on` is found, 1 when one is, 2 on usage,
config or input errors (a playbook that errors is reported, not an input error).
"""

from __future__ import annotations

import contextlib
import tomllib
from pathlib import Path
from typing import Any

import click
import orjson

from traceq.cli.common import Failure, checked_gpu, typed
from traceq.cli.sql import MEMORY_LIMIT
from traceq.findings import SEVERITIES
from traceq.playbooks import Options, diagnose, load_catalog, load_dir
from traceq.playbooks.loader import LoadReport, builtin_dir
from traceq.playbooks.render import render_explain, render_markdown, render_text
from traceq.playbooks.steps import Step, summary
from traceq.playbooks.words import counted
from traceq.session import QueryError, Session
from traceq.whatif.cite import diagnose_and_cite


class FindingsFailed(click.ClickException):
    """Exit 1: findings (or lint issues) at or above the threshold; already printed."""

    exit_code = 1

    def __init__(self) -> None:
        super().__init__("findings")

    def show(self, file: Any = None) -> None:
        pass


def _catalog(directory: str | None) -> LoadReport:
    report = load_catalog(directory)
    if report.issues:
        shown = "; ".join(str(i) for i in report.issues[:5])
        more = f" (+{len(report.issues) - 5} more)" if len(report.issues) > 5 else ""
        raise Failure(f"invalid playbooks: {shown}{more}; run `traceq playbooks lint`")
    return report


def _config(path: str | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise Failure(f"--config {path}: {exc}") from exc


def _overrides(
    report: LoadReport, config: dict[str, Any], pairs: tuple[str, ...]
) -> dict[str, dict[str, Any]]:
    """`[params.ID] NAME = V` from the config, then `--param ID.NAME=V`; unknown names fail,
    and so does a value outside the parameter's `min` / `max` (a one-line error, exit 2)."""
    known = report.by_id()
    found: dict[str, dict[str, Any]] = {}
    items = [
        (pid, name, value, f"--config [params.{pid}] {name}")
        for pid, values in (config.get("params") or {}).items()
        for name, value in (values or {}).items()
    ]
    for pair in pairs:
        key, sep, value = pair.partition("=")
        pid, dot, name = key.rpartition(".")
        if not sep or not dot:
            raise click.UsageError(f"--param expects ID.NAME=VALUE, got {pair!r}")
        items.append((pid, name, typed(value), f"--param {pid}.{name}"))
    for pid, name, value, origin in items:
        if pid not in known:
            raise click.UsageError(f"no playbook {pid!r}; run `traceq playbooks list`")
        if name not in known[pid].params:
            names = ", ".join(known[pid].params)
            raise click.UsageError(f"playbook {pid} has no parameter {name!r} (has: {names})")
        problem = known[pid].params[name].violation(value)
        if problem:
            raise Failure(f"{origin}: {problem}")
        found.setdefault(pid, {})[name] = value
    return found


@click.command("diagnose")
@click.argument("dataset")
@click.option("--playbooks", "playbook_dir", help="Extra playbooks (a directory of YAML); "
              "same ids replace the built-in ones.")  # fmt: skip
@click.option("--only", multiple=True, metavar="ID", help="Run only these playbooks "
              "(repeatable or comma-separated).")  # fmt: skip
@click.option("--param", "params", multiple=True, metavar="ID.NAME=V",
              help="Override a playbook parameter (repeatable).")  # fmt: skip
@click.option("--gpu", "gpu_name", metavar="NAME", help="The GPU the run served on, for the "
              "GPU-scaled floors, where the data names none or the wrong one: an id or name "
              "of traceq/hardware/gpus.csv (l4, a100-sxm4-80gb, H200).")  # fmt: skip
@click.option("--config", "config_path", help="TOML file: [params.ID] NAME = V, "
              "[diagnose] fail_on / format / playbooks / gpu.")  # fmt: skip
@click.option("--format", "out_format", type=click.Choice(["text", "json", "markdown"]),
              default=None, help="Output format [default: text].")  # fmt: skip
@click.option("--fail-on", type=click.Choice(SEVERITIES), default=None,
              help="Exit 1 on an incident this severe or worse [default: info].")  # fmt: skip
@click.option("--engine", type=click.Choice(["duckdb", "spark"]), default="duckdb",
              help="Query engine: DuckDB on this machine, or Spark (local mode, or the "
              "cluster of SPARK_REMOTE / spark-submit; docs/SCALE.md).")  # fmt: skip
@click.option("-v", "--verbose", is_flag=True, help="Text: list passing playbooks too.")
@click.option("--profile", is_flag=True, help="Print seconds per playbook and the slowest "
              "queries to stderr.")  # fmt: skip
@MEMORY_LIMIT
def diagnose_cmd(
    dataset: str,
    playbook_dir: str | None,
    only: tuple[str, ...],
    params: tuple[str, ...],
    gpu_name: str | None,
    config_path: str | None,
    out_format: str | None,
    fail_on: str | None,
    engine: str,
    verbose: bool,
    profile: bool,
    memory_limit: str,
) -> None:
    """Run the playbooks over DATASET: what is wrong, where, why and what to check next."""
    config = _config(config_path)
    settings = config.get("diagnose") or {}
    report = _catalog(playbook_dir or settings.get("playbooks"))
    wanted = [x for item in only for x in item.split(",") if x]
    unknown = sorted(set(wanted) - set(report.by_id()))
    if unknown:
        raise click.UsageError(f"no playbook {', '.join(unknown)}; run `traceq playbooks list`")
    playbooks = [p for p in report.playbooks if not wanted or p.id in wanted]
    steps: list[Step] = []
    options = Options(
        overrides=_overrides(report, config, params),
        gpu=checked_gpu(gpu_name, settings.get("gpu")),
        profile=steps,
    )
    fail_on = fail_on or settings.get("fail_on", "info")
    if fail_on not in SEVERITIES:
        raise Failure(f"fail_on must be one of {', '.join(SEVERITIES)}, got {fail_on!r}")
    try:
        if engine == "spark":
            result = _diagnose_spark(dataset, playbooks, options)
        else:
            with Session(dataset, memory_limit=memory_limit) as session:
                result = diagnose_and_cite(session, playbooks, options)
    except (QueryError, ValueError) as exc:
        raise Failure(str(exc)) from exc
    if profile:
        click.echo(summary(steps), err=True, nl=False)
    out_format = out_format or settings.get("format", "text")
    if out_format == "json":
        click.echo(orjson.dumps(result.to_dict(), option=orjson.OPT_INDENT_2).decode())
    elif out_format == "markdown":
        click.echo(render_markdown(result), nl=False)
    else:
        click.echo(render_text(result, verbose=verbose), nl=False)
    if result.failing(fail_on):
        raise FindingsFailed


def _diagnose_spark(dataset: str, playbooks: list[Any], options: Options) -> Any:
    """`diagnose` with the queries run by Spark (traceq/spark/)."""
    try:
        import pyspark  # noqa: F401

        from traceq.spark import SparkExecutor, spark_session
    except ImportError as exc:
        raise Failure(f"--engine spark needs pyspark: pip install 'traceq[spark]' ({exc})") from exc
    spark = spark_session()
    with contextlib.suppress(Exception):  # Spark Connect has no SparkContext here
        spark.sparkContext.setLogLevel("FATAL")  # failing queries are reported per playbook
    with SparkExecutor(spark, dataset) as executor:
        for view, reason in executor.skipped.items():
            click.echo(f"warning: view {view} is not on Spark: {reason}", err=True)
        return diagnose(executor, playbooks, options)


@click.command("explain")
@click.argument("playbook_id", metavar="ID")
@click.option("--playbooks", "playbook_dir", help="Extra playbooks directory.")
def explain_cmd(playbook_id: str, playbook_dir: str | None) -> None:
    """Print a playbook's documentation: what, why, parameters, causes, fixes."""
    report = _catalog(playbook_dir)
    pb = report.by_id().get(playbook_id)
    if pb is None:
        raise Failure(f"no playbook {playbook_id!r}; run `traceq playbooks list`")
    click.echo(render_explain(pb), nl=False)


@click.group("playbooks")
def playbooks_cmd() -> None:
    """List and check playbooks (built-in: traceq/playbooks/catalog/)."""


@playbooks_cmd.command("list")
@click.option("--playbooks", "playbook_dir", help="Extra playbooks directory.")
def list_cmd(playbook_dir: str | None) -> None:
    """The playbooks with their severity and title."""
    for pb in sorted(_catalog(playbook_dir).playbooks, key=lambda p: p.id):
        click.echo(f"{pb.id:22} {pb.severity:8} {pb.title}")


@playbooks_cmd.command("lint")
@click.argument("directory", required=False)
def lint_cmd(directory: str | None) -> None:
    """Check playbook files (DIRECTORY, default the built-in ones): schema, docs, and every
    query bound against the real views. Exit 1 when any issue is found."""
    from traceq.playbooks.lint import lint

    builtin = load_dir(builtin_dir())
    report = load_dir(directory, beside=builtin.playbooks) if directory else builtin
    issues = lint(report)
    for issue in issues:
        click.echo(str(issue))
    click.echo(f"{len(report.playbooks)} playbooks, {counted(len(issues), 'issue')}")
    if issues:
        raise FindingsFailed


__all__ = ["diagnose_cmd", "explain_cmd", "playbooks_cmd"]
