"""Single-instance datasets read the same since requests are stitched across hops: every view
and every table of every sample_traces/ scenario, in the columns it had before
(tests/data/sample_views_digest.json, written by `digests` at the commit before the stitch),
hashes to the same bytes. Columns added since (request_phases' route_ms, …) are not compared.

Rows are sorted on every column before hashing (views without an ORDER BY may come in any
order) and queries run on one thread (kpi_latency's double sums would differ in the last bit
with the summation order otherwise). kpi_latency's means are sums over its histogram's buckets
(traceq/sql/views.sql), so their last bits follow the bucket widths: its digests are those of
today's widths; its percentiles did not move when the widths did. To accept a deliberate
change of a view's numbers:
`python -m tests.test_sample_views_unchanged > tests/data/sample_views_digest.json`.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from traceq import db, docs
from traceq.dataset import Dataset
from traceq.ingest import ingest

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests/data/sample_views_digest.json"
TABLES = ("requests", "tokens", "spans", "events", "quarantine")
SCENARIOS = sorted(p.name for p in (ROOT / "sample_traces").iterdir() if p.is_dir())


def digest(con, relation: str, columns: list[str] | None = None) -> dict:
    frame = con.table(relation).pl()
    columns = columns or frame.columns
    frame = frame.select(columns)
    if frame.height:
        frame = frame.sort(columns, nulls_last=True)
    text = frame.write_csv().encode()
    return {"columns": columns, "rows": frame.height, "sha256": hashlib.sha256(text).hexdigest()}


def _connect(path: Path):
    ds = Dataset(path)
    return db.connect(ds, ds.manifest(), threads=1)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_view_of_a_sample_scenario_is_unchanged(scenario, tmp_path):
    golden = json.loads(GOLDEN.read_text())[scenario]
    ingest([ROOT / "sample_traces" / scenario], tmp_path / "ds")
    con = _connect(tmp_path / "ds")
    changed = [name for name, want in golden.items() if digest(con, name, want["columns"]) != want]
    assert not changed, f"{scenario}: {changed} read differently from before the stitch"


def digests(out: dict | None = None) -> dict:
    """The digest of every view and table of every scenario, ingested into a scratch folder."""
    import tempfile

    out = {} if out is None else out
    with tempfile.TemporaryDirectory() as tmp:
        for scenario in SCENARIOS:
            path = Path(tmp) / scenario
            ingest([ROOT / "sample_traces" / scenario], path)
            con = _connect(path)
            names = [v.name for v in docs.views()] + list(TABLES)
            out[scenario] = {name: digest(con, name) for name in names}
    return out


if __name__ == "__main__":
    json.dump(digests(), sys.stdout, indent=1, sort_keys=True)
