"""Contracts of the ingest families (issue 9 §7): the `Family` protocol, one second-pass
DuckDB set-up that is bounded and always closed."""

from __future__ import annotations

import importlib
from pathlib import Path

import duckdb
import pytest

from traceq.dataset import Dataset
from traceq.ingest import FAMILIES, formats
from traceq.ingest.family import Family
from traceq.ingest.second_pass import SECOND_PASS_MEMORY, second_pass


def test_every_family_follows_the_protocol() -> None:
    names: list[str] = []
    for name in FAMILIES:
        module = importlib.import_module(name)
        assert isinstance(module, Family), name
        names += module.FORMATS
    assert len(names) == len(set(names)) == len(formats())  # no format claimed twice


def test_second_pass_is_bounded_spills_inside_staging_and_closes(tmp_path: Path) -> None:
    writer = Dataset(tmp_path / "ds", create=True).writer("abc")
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
