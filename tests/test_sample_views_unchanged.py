"""Every view and every table of every sample_traces/ scenario, in the columns it had before
(tests/data/sample_views_digest.json, written by `digests` at the commit before requests were
stitched across hops), hashes to the same bytes; so does `traceq diagnose --format json` of
each, finding by finding, less its clock (tests/data/sample_diagnose_digest.json). A faster
reader or query plan must read the same. Columns added since (request_phases' route_ms, …)
are not compared.

Rows are sorted on every column before hashing (views without an ORDER BY may come in any
order) and queries run on one thread (kpi_latency's double sums would differ in the last bit
with the summation order otherwise). kpi_latency's means are sums over its histogram's buckets
(traceq/sql/views.sql), so their last bits follow the bucket widths: its digests are those of
today's widths; its percentiles did not move when the widths did. To accept a deliberate
change of a view's numbers:
`python -m tests.test_sample_views_unchanged > tests/data/sample_views_digest.json`; of
diagnose's findings (a playbook's wording or thresholds):
`python -m tests.test_sample_views_unchanged diagnose > tests/data/sample_diagnose_digest.json`.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import orjson
import pytest

from traceq import db, docs
from traceq.dataset import Dataset
from traceq.ingest import ingest
from traceq.playbooks import Options, load_catalog
from traceq.session import Session
from traceq.whatif.cite import diagnose_and_cite

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests/data/sample_views_digest.json"
DIAGNOSE_GOLDEN = ROOT / "tests/data/sample_diagnose_digest.json"
CLOCK = ("started_at", "elapsed_s", "dataset")
"""Keys of diagnose's JSON that change from run to run (its clock, the dataset's path)."""
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
    con.close()
    want = json.loads(DIAGNOSE_GOLDEN.read_text())[scenario]
    got = diagnose_digest(tmp_path / "ds")
    changed = sorted(k for k in want.keys() | got.keys() if want.get(k) != got.get(k))
    assert not changed, f"{scenario}: diagnose's {changed} changed"


def diagnose_digest(path: Path) -> dict[str, str]:
    """sha256 of diagnose's JSON (less CLOCK) per finding, for the incidents and the tail."""
    with Session(path) as s:
        doc = diagnose_and_cite(s, load_catalog().playbooks, Options()).to_dict()

    def sha(v: object) -> str:
        return hashlib.sha256(orjson.dumps(v, option=orjson.OPT_SORT_KEYS)).hexdigest()

    parts = {f"finding {f['id']}": {k: v for k, v in f.items() if k not in CLOCK}
             for f in doc.pop("findings")}  # fmt: skip
    parts |= {k: v for k, v in doc.items() if k not in CLOCK}
    return {k: sha(v) for k, v in parts.items()}


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


def diagnose_digests() -> dict:
    """diagnose_digest of every scenario, ingested into a scratch folder."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = {}
        for scenario in SCENARIOS:
            path = Path(tmp) / scenario
            ingest([ROOT / "sample_traces" / scenario], path)
            out[scenario] = diagnose_digest(path)
    return out


if __name__ == "__main__":
    make = diagnose_digests if sys.argv[1:] == ["diagnose"] else digests
    json.dump(make(), sys.stdout, indent=1, sort_keys=True)
