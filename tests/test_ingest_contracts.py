"""Contracts of the ingest families: the `Family` protocol, one second-pass
DuckDB set-up that is bounded and always closed."""

from __future__ import annotations

import importlib
from pathlib import Path

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from traceq.dataset import Dataset
from traceq.ingest import FAMILIES, formats
from traceq.ingest.family import Family
from traceq.ingest.second_pass import SECOND_PASS_MEMORY, second_pass
from traceq.schema import polars_schema
from traceq.writer import SourceWriter


def test_every_family_follows_the_protocol() -> None:
    names: list[str] = []
    for name in FAMILIES:
        module = importlib.import_module(name)
        assert isinstance(module, Family), name
        names += module.FORMATS
    assert len(names) == len(set(names)) == len(formats())  # no format claimed twice


def test_second_pass_is_bounded_spills_inside_staging_and_closes(tmp_path: Path) -> None:
    writer = SourceWriter(Dataset(tmp_path / "ds", create=True), "abc")
    with second_pass(writer) as con:
        limit = con.sql("SELECT current_setting('memory_limit')").fetchall()[0][0]
        spill = con.sql("SELECT current_setting('temp_directory')").fetchall()[0][0]
    assert SECOND_PASS_MEMORY == "512MB" and limit == "488.2 MiB"  # DuckDB prints MB as MiB
    assert Path(spill).parent == writer.scratch
    with pytest.raises(duckdb.Error), second_pass(writer) as con:
        kept = con
        con.sql("SELECT * FROM no_such_table")
    with pytest.raises(duckdb.ConnectionException):  # closed although the query failed
        kept.sql("SELECT 1")
    writer.discard()


def test_a_view_is_written_as_write_would_write_its_rows(tmp_path: Path) -> None:
    """`SourceWriter.write_view` (DuckDB writes the staged file, no batch through Python)
    conforms the rows as `write` does: the schema's columns, types and order, the source id
    and labels set, the rows counted and the time range taken in. An empty view writes no
    file; `quarantine` is appended to; a table written whole takes nothing after it."""
    ds = Dataset(tmp_path / "ds", create=True)
    by_view, by_write = SourceWriter(ds, "byview"), SourceWriter(ds, "bywrite")
    for writer in (by_view, by_write):
        writer.labels["instance"] = "node-a"
    rows = (
        "SELECT * FROM (VALUES ('r1', 'server', 'elsewhere', 100::BIGINT, 900::BIGINT, 3), "
        "('r2', 'client', NULL, 50::BIGINT, NULL, NULL)) "
        "AS t(request_id, view, instance, t_arrival, t_last_token, output_tokens)"
    )
    with second_pass(by_view) as con:
        con.sql(rows).create_view("requests_out")
        con.execute("CREATE VIEW nothing AS SELECT request_id FROM requests_out WHERE false")
        con.execute("CREATE VIEW reasons AS SELECT 'line 1' AS location, 'why' AS reason")
        con.execute("CREATE VIEW unknown AS SELECT 1 AS no_such_column")
        by_view.write_view("requests", con, "requests_out")
        by_view.write_view("spans", con, "nothing")
        by_view.write_view("quarantine", con, "reasons")
        by_view.write_view("quarantine", con, "reasons")
        with pytest.raises(ValueError, match="no column"):
            by_view.write_view("spans", con, "unknown")
        with pytest.raises(ValueError, match="no table 'span'"):  # a typo, even with no rows
            by_view.write_view("span", con, "nothing")
        frame = con.sql(rows).pl()
    by_write.write("requests", frame)
    with pytest.raises(ValueError, match="written whole"):
        by_view.write("requests", frame)
    files, expected = by_view.close(), by_write.close()
    assert set(files) == {"requests", "quarantine"}
    got, want = pl.read_parquet(files["requests"]), pl.read_parquet(expected["requests"])
    assert got.schema == want.schema == polars_schema("requests")
    assert_frame_equal(got.drop("source_id"), want.drop("source_id"))
    assert got["source_id"].to_list() == ["byview"] * 2
    assert got["instance"].to_list() == ["node-a"] * 2
    assert by_view.rows == {"requests": 2, "quarantine": 2}
    assert (by_view.t_min, by_view.t_max) == (by_write.t_min, by_write.t_max) == (50, 900)
    by_view.discard()
    by_write.discard()
