"""Docs that cannot go stale: generated pages are current, every view column is documented."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

import traceq
from traceq import docs, schema
from traceq.dataset import Dataset

ROOT = Path(__file__).resolve().parent.parent


def test_schema_page_is_current():
    assert (ROOT / "docs/SCHEMA.md").read_text() == schema.render_markdown(), (
        "run: python -m traceq.schema > docs/SCHEMA.md"
    )


def test_views_page_is_current():
    assert (ROOT / "docs/VIEWS.md").read_text() == docs.render_markdown(), (
        "run: python -m traceq.docs > docs/VIEWS.md"
    )


def test_every_view_and_column_is_documented(tmp_path):
    con = traceq.open(Dataset(tmp_path / "empty.tq", create=True))
    documented = docs.views()
    assert len(documented) >= 4
    for view in documented:
        assert view.doc, f"view {view.name} has no description"
        actual = con.table(view.name).columns
        assert list(view.columns) == actual, view.name
        assert all(view.columns.values()), view.name


def test_duckdb_shows_every_view_and_column_doc(tmp_path):
    """A notebook user reads the docs from DuckDB's own catalogue (views are created unbound,
    traceq/db.py `_deferred`; their comments are there all the same)."""
    con = traceq.open(Dataset(tmp_path / "empty.tq", create=True))
    views = dict(con.sql("SELECT view_name, comment FROM duckdb_views()").fetchall())
    columns = {
        (t, c): doc
        for t, c, doc in con.sql(
            "SELECT table_name, column_name, comment FROM duckdb_columns()"
        ).fetchall()
    }
    for view in docs.views():
        assert views[view.name] == view.doc, view.name
        for column, doc in view.columns.items():
            assert columns[view.name, column] == doc, (view.name, column)
    ts = next(c for c in schema.TABLES["tokens"] if c.name == "ts")
    assert columns["tokens", "ts"].startswith(ts.doc)


def test_every_schema_column_has_a_doc():
    for table, columns in schema.TABLES.items():
        for column in columns:
            assert column.doc.strip(), f"{table}.{column.name}"


def test_readme_quickstart_has_exactly_two_commands():
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Quickstart", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make demo", "make test"]


DOCTESTED = sorted(
    ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    for p in (ROOT / "traceq").rglob("*.py")
    if ">>> " in p.read_text()
)


@pytest.mark.parametrize("module", DOCTESTED)
def test_docstring_examples_run(module: str) -> None:
    """Every `>>>` example in traceq's docstrings runs and prints what it shows (those marked
    `+SKIP` need a bucket or a dataset the reader has)."""
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = doctest.testmod(importlib.import_module(module), optionflags=flags)
    assert result.failed == 0
