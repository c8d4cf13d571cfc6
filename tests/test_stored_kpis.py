"""kpi_latency's figures stored at ingest (traceq/stored_kpis.py, traceq/ingest/kpis.py): read
back while they match the files, computed from the files otherwise, the same to the last bit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

import traceq
from traceq import stored_kpis
from traceq.session import Session

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


def _kpis(ds: Path) -> pl.DataFrame:
    with Session(ds, threads=1) as s:  # one summation order: the means' last bits repeat
        return s.query("SELECT * FROM kpi_latency")


def _manifest(ds: Path) -> dict:
    return json.loads((ds / "manifest.json").read_text())


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Path:
    """The client-jitter sample (server and client traces) ingested with figures stored."""
    ds = tmp_path_factory.mktemp("stored") / "ds"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stored_kpis, "STORE_MIN_CHUNKS", 0)
        traceq.ingest([SAMPLES / "client-jitter"], ds)
    return ds


def test_a_large_dataset_reads_back_what_the_files_give(stored, tmp_path):
    manifest = _manifest(stored)
    entry = manifest["kpi_latency"]
    assert (stored / entry["file"]).is_file()
    assert entry == stored_kpis.current(manifest)
    live = tmp_path / "live"
    shutil.copytree(stored, live)
    del manifest["kpi_latency"]
    (live / "manifest.json").write_text(json.dumps(manifest))
    shutil.rmtree(live / "kpis")
    assert _kpis(live).height == 9 and _kpis(live)["n"].min() > 0
    assert _kpis(stored).equals(_kpis(live))  # same floats, to the last bit


def test_the_view_reads_the_stored_file(stored, tmp_path):
    """Proof that the stored rows are what kpi_latency shows: doubled counts show through."""
    ds = tmp_path / "ds"
    shutil.copytree(stored, ds)
    path = ds / _manifest(ds)["kpi_latency"]["file"]
    rows = pl.read_parquet(path)
    rows.with_columns(pl.col("s").struct.with_fields(pl.field("n") * 2)).write_parquet(path)
    assert _kpis(ds)["n"].to_list() == [2 * n for n in _kpis(stored)["n"].to_list()]


def test_figures_stored_for_other_files_are_not_read(stored, tmp_path):
    """A source list changed without storing again (another writer, a hand edit): the view
    computes from the files."""
    ds = tmp_path / "ds"
    shutil.copytree(stored, ds)
    before = _kpis(ds)
    manifest = _manifest(ds)
    dropped = next(s for s in manifest["sources"] if s["path"].endswith("client.otlp.jsonl"))
    manifest["sources"].remove(dropped)
    (ds / "manifest.json").write_text(json.dumps(manifest))
    assert stored_kpis.current(manifest) is None
    after = _kpis(ds)
    assert not after.equals(before)  # the client's gaps no longer pooled in
    manifest["kpi_latency"]["key"] = "../../outside"
    (ds / "manifest.json").write_text(json.dumps(manifest))
    assert _kpis(ds).equals(after)


def test_a_small_dataset_stores_nothing_and_drops_a_stale_entry(stored, tmp_path):
    ds = tmp_path / "ds"
    shutil.copytree(stored, ds)
    traceq.ingest([SAMPLES / "gpu-throttle" / "dcgm.prom"], ds)  # under the default threshold
    assert "kpi_latency" not in _manifest(ds)
    assert _kpis(ds).equals(_kpis(stored))  # the GPU file changes no latency
