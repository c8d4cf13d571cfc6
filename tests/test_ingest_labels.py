"""`--instance` / `--host` label a source's rows; the writer refuses tables the schema lacks."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from traceq.dataset import Dataset
from traceq.ingest import IngestOptions, ingest
from traceq.session import Session
from traceq.writer import SourceWriter

SAMPLE = Path(__file__).resolve().parent.parent / "sample_traces" / "kv-pressure"


def test_instance_and_host_label_every_row(tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    options = IngestOptions(year=2025, instance="node-7", host="gpu-box-7")
    ingest([SAMPLE / "vllm.log", SAMPLE / "nvidia-smi.csv"], ds, options=options)
    with Session(ds) as s:
        stats = s.query("SELECT DISTINCT instance FROM engine_stats")
        events = s.query("SELECT DISTINCT instance FROM events")
        hosts = s.query("SELECT DISTINCT host FROM gpu_samples")
    assert stats["instance"].to_list() == ["node-7"]
    assert events["instance"].to_list() == ["node-7"]
    assert hosts["host"].to_list() == ["gpu-box-7"]


def test_writer_refuses_a_table_the_schema_lacks(tmp_path: Path) -> None:
    writer = SourceWriter(Dataset(tmp_path / "ds", create=True), "abc")
    frame = pl.DataFrame({"ts": [1]})
    with pytest.raises(ValueError, match="no table 'engine_stat' in the schema"):
        writer.write("engine_stat", frame)  # a typo must not become a silent scratch table
    with pytest.raises(ValueError, match="is a schema table"):
        writer.write_scratch("engine_stats", frame)
    writer.write_scratch("my_stage", frame)
    assert writer.close() == {}  # scratch files are never committed
    writer.discard()
