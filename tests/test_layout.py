"""The dataset layout (traceq/layout.py): files partitioned by day (and instance), sorted, with
row groups whose statistics let a time filter skip most of them; datasets of the older flat
layout still open."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import traceq
from tests.otel_factory import MS, RequestSpec, make_spans, write_otlp_json
from traceq import db, layout, schema
from traceq.dataset import Dataset, DatasetError
from traceq.ingest import IngestOptions

MIDNIGHT = 1_750_032_000_000_000_000  # 2025-06-16T00:00:00Z
S = 1000 * MS
N = 240  # requests, one a second, the first 120 before midnight
CHUNKS = 100
INSTANCE = "../node a"  # hostile as a path, fine as a name


def _source(tmp_path: Path) -> Path:
    # requests out of arrival order in the file, 100 chunks each, 10 ms apart
    specs = [
        RequestSpec(
            f"r{i:03d}",
            arrival=MIDNIGHT + (i - N // 2) * S,
            tokens=[MIDNIGHT + (i - N // 2) * S + (k + 1) * 10 * MS for k in range(CHUNKS)],
            attributes={"gen_ai.request.id": f"r{i:03d}"},
        )
        for i in reversed(range(N))
    ]
    return write_otlp_json(make_spans(specs), tmp_path / "midnight.jsonl")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The source ingested with small row groups (the real ones hold 128 Ki-1 Mi rows;
    DuckDB rounds a row group up to a multiple of 2,048 rows), so that the gaps filled while
    writing cross row-group and vector boundaries (every gap is 10 ms), and with each minute of
    first-chunk time sorted as a piece of its own (two pieces a day)."""
    tmp = tmp_path_factory.mktemp("layout")
    ds = tmp / "ds"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(layout, "ROW_GROUP_ROWS", {"tokens": 2048})
        mp.setattr(layout, "TOKENS_PIECE_ROWS", 1)
        traceq.ingest([_source(tmp)], ds, options=IngestOptions(instance=INSTANCE))
    return ds


def test_files_land_in_the_partition_of_their_day_and_instance(dataset: Path) -> None:
    [entry] = Dataset(dataset).sources()
    sid, folder = entry["source_id"], "instance=%2E.%2Fnode%20a"
    for table, column in (("requests", "t_arrival"), ("tokens", "ts"), ("spans", "t_start")):
        assert entry["files"][table] == [
            f"{table}/day=2025-06-15/{folder}/{sid}.parquet",
            f"{table}/day=2025-06-16/{folder}/{sid}.parquet",
        ]
        before, after = (pl.read_parquet(dataset / rel) for rel in entry["files"][table])
        if table == "tokens":  # a request's chunks stay together, in the day of its first
            before, after = (f.group_by("request_id").agg(pl.min("ts")) for f in (before, after))
            assert before["request_id"].max() == "r119"  # its last chunk is at midnight
        assert max(before[column].to_list()) < MIDNIGHT <= min(after[column].to_list())
        assert "day" not in before.columns  # the folders name partitions, not columns
    assert sorted(p.name for p in dataset.iterdir()) == [
        ".lock",
        ".staging",
        "gap_buckets",
        "manifest.json",
        "request_gaps",
        "request_pick",
        "requests",
        "spans",
        "tokens",
    ]
    con = traceq.open(dataset)
    assert con.sql("SELECT count(*), count(DISTINCT instance) FROM requests").fetchall() == [(N, 1)]
    assert con.sql("SELECT count(*) FROM token_gaps WHERE tbt_ms = 10").fetchall() == [
        ((CHUNKS - 1) * N,)
    ]


def test_rows_are_sorted_for_the_views(dataset: Path) -> None:
    [entry] = Dataset(dataset).sources()
    for rel in entry["files"]["requests"]:
        arrivals = pq.read_table(dataset / rel)["t_arrival"].to_pylist()
        assert arrivals == sorted(arrivals)
    for rel in entry["files"]["tokens"]:
        rows = pq.read_table(dataset / rel).select(["request_id", "idx", "ts"]).to_pylist()
        # each request's chunks together, in idx order; requests by their first chunk
        assert rows == sorted(rows, key=lambda r: (r["ts"] - r["idx"] * 10 * MS, r["idx"]))


def test_a_time_filter_reads_a_fraction_of_the_row_groups(dataset: Path, tmp_path: Path) -> None:
    ds = Dataset(dataset)
    groups = [
        pq.ParquetFile(dataset / rel).metadata.num_row_groups
        for rel in ds.sources()[0]["files"]["tokens"]
    ]
    # 12,000 chunks a day in groups of 2,048 rows or a little more: DuckDB closes a group at the
    # first vector (up to 2,048 rows) that reaches the size, and a piece's last vector is short
    assert all(5 <= g <= 6 for g in groups)
    con = db.connect(ds, ds.manifest(), read_only=False)
    profile = tmp_path / "profile.json"
    con.execute("SET enable_profiling = 'json'")
    con.execute("SET profiling_mode = 'detailed'")
    con.execute("SET profiling_output = ?", [str(profile)])
    ten_seconds = [MIDNIGHT - 30 * S, MIDNIGHT - 20 * S]
    query = "SELECT count(*) FROM token_gaps WHERE ts >= ? AND ts < ?"
    [(n,)] = con.execute(query, ten_seconds).fetchall()
    assert n == CHUNKS * 10  # every chunk of the ten seconds
    query = json.loads(profile.read_text())["query"]
    # every tokens group (and the pick's one) is a candidate; 1,000 chunks lie in one or two
    assert query["total_row_groups_to_scan"] >= sum(groups)
    assert 1 <= query["total_row_groups_scanned"] <= 3


def test_a_dataset_of_the_flat_layout_still_opens(dataset: Path, tmp_path: Path) -> None:
    flat = tmp_path / "flat"
    shutil.copytree(dataset, flat)
    manifest = json.loads((flat / "manifest.json").read_text())
    for source in manifest["sources"]:  # as traceq wrote datasets before the partitions
        for table, rels in source["files"].items():
            merged = pq.ParquetFile(flat / rels[0]).schema_arrow.empty_table()
            tables = [merged, *(pq.read_table(flat / rel) for rel in rels)]
            pq.write_table(
                pa.concat_tables(tables), flat / table / f"{source['source_id']}.parquet"
            )
            source["files"][table] = f"{table}/{source['source_id']}.parquet"
        for table in source["files"]:
            for day in (flat / table).glob("day=*"):
                shutil.rmtree(day)
    (flat / "manifest.json").write_text(json.dumps(manifest))
    query = "SELECT count(*), sum(tbt_ms) FROM token_gaps"
    assert traceq.open(flat).sql(query).fetchall() == traceq.open(dataset).sql(query).fetchall()


def test_a_linked_partition_folder_is_never_followed(dataset: Path, tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    shutil.copytree(dataset, ds)
    day = next((ds / "requests").glob("day=*"))
    elsewhere = tmp_path / "elsewhere"
    day.rename(elsewhere)
    day.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(DatasetError, match="resolves outside the dataset"):
        traceq.open(ds)
    before = sorted(p.name for p in elsewhere.rglob("*"))
    staged = tmp_path / "staged.parquet"
    staged.write_bytes(b"PAR1")
    laid = {"requests": {f"requests/{day.name}/x.parquet": staged}}
    with pytest.raises(DatasetError, match="symbolic link"):
        Dataset(ds).commit({"source_id": "x"}, laid)
    assert sorted(p.name for p in elsewhere.rglob("*")) == before and staged.exists()


def test_tokens_sorted_in_pieces_are_the_one_sort_row_for_row(
    dataset: Path, tmp_path: Path
) -> None:
    """The fixture sorted each minute of first-chunk time on its own; one sort of each whole
    day (the default piece holds 8 Mi chunks) gives the same files, row for row, in order."""
    whole = tmp_path / "whole"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(layout, "ROW_GROUP_ROWS", {"tokens": 2048})
        traceq.ingest([_source(tmp_path)], whole, options=IngestOptions(instance=INSTANCE))
    [pieces], [one] = Dataset(dataset).sources(), Dataset(whole).sources()
    days = [rel.rsplit("/", 1)[0] for rel in one["files"]["tokens"]]
    assert [rel.rsplit("/", 1)[0] for rel in pieces["files"]["tokens"]] == days  # two
    for a, b in zip(pieces["files"]["tokens"], one["files"]["tokens"], strict=True):
        # the source files differ only in their random trace ids, hence in source_id
        left, right = (pl.read_parquet(p).drop("source_id") for p in (dataset / a, whole / b))
        assert left.equals(right)


MINUTE = 60 * S
INT64 = (1 << 63) - 1


@pytest.mark.parametrize("direct", [0, 100], ids=["first-chunk-scratch", "joined-in-place"])
@pytest.mark.parametrize("most", [1, 7, 1 << 23])
def test_every_chunk_lands_once_in_the_day_of_its_request(
    tmp_path: Path, most: int, direct: int
) -> None:
    """Times before 1970 (a minute is floored, never truncated toward 0), at both ends of int64,
    across midnight, and a request without any time: each request whole, in the day of its
    first chunk, requests in order, the time-less one in the null partition; with every minute
    a piece, with pieces of several minutes, and with one piece; with the first-chunk times
    written beside each chunk first, and joined as each piece reads the chunks."""
    first: dict[str, list[int | None]] = {  # request → its chunks' times
        "a": [-INT64 - 1, -INT64],
        "b": [-MINUTE - 1, -1, 5],  # 1969-12-31 23:58:59.999…, first chunk of its request
        "c": [-1, 0],
        "d": [0, MINUTE - 1, MINUTE],
        "e": [MINUTE, 24 * 60 * MINUTE],
        "f": [24 * 60 * MINUTE - 1, 24 * 60 * MINUTE],
        "g": [None, None],
        "h": [INT64 - 1, INT64],
    }
    rows = [
        {"request_id": r, "idx": i, "ts": t, "view": "server"}
        for r, times in first.items()
        for i, t in enumerate(times)
    ]
    columns = {c.name: c.dtype for c in schema.TABLES["tokens"]}
    tokens = pl.DataFrame(rows, schema_overrides={"ts": pl.Int64})
    tokens = tokens.select(
        pl.col(c).cast(t) if c in tokens.columns else pl.lit(None, t).alias(c)
        for c, t in columns.items()
    ).sample(fraction=1.0, shuffle=True, seed=1)
    staged = tmp_path / "scratch" / "tokens.parquet"
    staged.parent.mkdir()
    tokens.write_parquet(staged)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(layout, "TOKENS_PIECE_ROWS", most)
        mp.setattr(layout, "DIRECT_T0_PIECES", direct)
        laid = layout.lay_out({"tokens": staged}, tmp_path / "scratch", "src")["tokens"]
    t0_files = list((tmp_path / "scratch" / "layout_tokens_t0").glob("*.parquet"))
    assert bool(t0_files) == (direct == 0)
    written = {p for p in (tmp_path / "scratch" / "laid").rglob("*") if p.is_file()}
    assert written == set(laid.values())  # each piece's file deleted once its day is written
    days = {
        rel.split("/")[1].removeprefix("day="): pl.read_parquet(path) for rel, path in laid.items()
    }
    expected = {
        "1677-09-21": "a",
        "1969-12-31": "bc",
        "1970-01-01": "def",
        "2262-04-11": "h",
        layout.NULL_PARTITION: "g",
    }
    assert list(days) == list(expected)
    for day, requests in expected.items():
        assert days[day].select("request_id", "idx", "ts", "gap_ns").rows() == [
            (r, i, t, _gap(t, first[r][i - 1]) if i else None)
            for r in requests
            for i, t in enumerate(first[r])
        ]
        assert days[day].columns == list(columns)


def _gap(t: int | None, before: int | None) -> int | None:
    return None if t is None or before is None else t - before
