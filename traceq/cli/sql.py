"""`traceq sql` and `traceq schema`: read-only SQL over a dataset through one `Session`."""

from __future__ import annotations

import shutil
import sys
from typing import Any

import click
import polars as pl

from traceq.cli.common import Failure, parse_params
from traceq.render import TABLE_MAX_ROWS, render_frame
from traceq.session import (
    DEFAULT_MEMORY_LIMIT,
    DEFAULT_ROW_CAP,
    DEFAULT_TIME_LIMIT_S,
    QueryError,
    Session,
)


def _open(dataset: str, time_limit: float, memory_limit: str, max_rows: int) -> Session:
    try:
        return Session(
            dataset, time_limit_s=time_limit, memory_limit=memory_limit, row_cap=max_rows
        )
    except (QueryError, ValueError) as exc:
        raise Failure(str(exc)) from exc


TIME_LIMIT = click.option(
    "--time-limit",
    type=float,
    default=DEFAULT_TIME_LIMIT_S,
    show_default=True,
    help="Seconds a query may run (0: no limit).",
)
MEMORY_LIMIT = click.option(
    "--memory-limit",
    default=DEFAULT_MEMORY_LIMIT,
    show_default=True,
    help="DuckDB memory limit; beyond it queries spill to disk.",
)


@click.command("sql")
@click.argument("dataset")
@click.argument("query", required=False)
@click.option("-f", "--file", "sql_file", type=click.File("r"),
              help="Read the query from FILE ('-' for standard input).")  # fmt: skip
@click.option("--format", "out_format", type=click.Choice(["table", "csv", "json"]),
              default="table", show_default=True)  # fmt: skip
@click.option("--param", "params", multiple=True, metavar="K=V",
              help="Bind $K to V (repeatable).")  # fmt: skip
@click.option("--max-rows", type=click.IntRange(min=1), default=DEFAULT_ROW_CAP,
              show_default=True, help="Rows printed at most (csv / json).")  # fmt: skip
@TIME_LIMIT
@MEMORY_LIMIT
def sql_cmd(
    dataset: str,
    query: str | None,
    sql_file: Any,
    out_format: str,
    params: tuple[str, ...],
    max_rows: int,
    time_limit: float,
    memory_limit: str,
) -> None:
    """Run one read-only SQL query over DATASET's tables and views.

    The query is the QUERY argument, the text of -f FILE, or standard input when QUERY is
    '-'. `traceq schema DATASET` lists the tables, views and columns.
    """
    if query == "-":
        text = sys.stdin.read()
    elif sql_file is not None:
        if query is not None:
            raise click.UsageError("give the query as QUERY or with -f, not both")
        text = sql_file.read()
    elif query is not None:
        text = query
    else:
        raise click.UsageError("no query: give QUERY, -f FILE or '-' for standard input")
    bound = parse_params(params)
    session = _open(dataset, time_limit, memory_limit, max_rows)
    try:
        if out_format == "table":
            results = session.execute(text, bound, row_cap=TABLE_MAX_ROWS)
            out = render_frame(results.frame, "table", width=_width())
            if results.truncated:
                out += f"(first {TABLE_MAX_ROWS} rows shown; use --format csv for more)\n"
            click.echo(out, nl=False)
            return
        header = True
        for frame in session.stream(text, bound):
            click.echo(render_frame(frame, out_format, header=header), nl=False)
            header = False
    except QueryError as exc:
        raise Failure(str(exc)) from exc
    finally:
        session.close()


def _width() -> int | None:
    """The terminal's width when printing to one, else no limit."""
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


@click.command("schema")
@click.argument("dataset")
@click.argument("name", required=False)
def schema_cmd(dataset: str, name: str | None) -> None:
    """Tables, views and columns of DATASET with their docs; NAME shows one of them."""
    with _open(dataset, DEFAULT_TIME_LIMIT_S, DEFAULT_MEMORY_LIMIT, DEFAULT_ROW_CAP) as s:
        try:
            catalog = s.catalog(name)
        except QueryError as exc:
            raise Failure(str(exc)) from exc
    if catalog.is_empty():
        raise Failure(f"no table or view named {name!r}; run `traceq schema {dataset}`")
    if name is None:
        relations = catalog.group_by("kind", "name", maintain_order=True).agg(
            columns=pl.len(), doc=pl.first("relation_doc")
        )
        click.echo(render_frame(relations, "table", width=_width()), nl=False)
        return
    click.echo(f"{name} ({catalog['kind'][0]}): {catalog['relation_doc'][0]}\n")
    columns = catalog.select("column", "type", "doc")
    click.echo(render_frame(columns, "table", width=_width()), nl=False)
