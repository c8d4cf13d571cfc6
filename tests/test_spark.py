"""One SQL, two engines: the views and playbook checks written for DuckDB give the same rows
on Spark (traceq/spark/), row for row, floating point to 1e-9 relative.

Spark runs in local mode with two cores (Java from Debian's packages: tests/spark/setup.sh).
One SparkSession for the module keeps the JVM start-up to once.
"""

from __future__ import annotations

import re

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from pyspark.sql import SparkSession

from tests.playbook_helpers import synth_dataset
from traceq.playbooks import load_catalog
from traceq.playbooks.engine import bind, run_playbook
from traceq.playbooks.executor import materialise_rollups
from traceq.schema import TABLES
from traceq.session import QueryError, Session
from traceq.spark import SparkExecutor, view_sql
from traceq.spark.translate import to_spark

SYMPTOMS = ("prefill-interference", "tbt-jitter", "kv-pressure", "slow-decode", "error-rate")


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    """The same generated dataset opened in DuckDB and registered in Spark."""
    ds = synth_dataset(tmp_path_factory.mktemp("spark"), "prefill-interference", 1, 200)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("traceq-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("FATAL")
    try:
        with Session(ds) as duck, SparkExecutor(spark, ds) as sparked:
            yield duck, sparked
    finally:
        spark.stop()


def normalise(frame: pl.DataFrame) -> pl.DataFrame:
    """Comparable across engines: numbers as Float64 or Int64, timestamps at µs (Spark's
    precision), rows in a total order."""
    casts = []
    for name, dtype in frame.schema.items():
        col = pl.col(name)
        if dtype.is_float() or dtype == pl.Decimal or dtype == pl.Int128:
            casts.append(col.cast(pl.Float64))
        elif dtype.is_integer():
            casts.append(col.cast(pl.Int64))
        elif isinstance(dtype, pl.Datetime):
            casts.append(col.dt.replace_time_zone(None).dt.cast_time_unit("us"))
        else:
            casts.append(col)
    out = frame.select(casts)
    return out.sort(out.columns, nulls_last=True)


def assert_same_rows(duck: pl.DataFrame, spark: pl.DataFrame) -> None:
    assert duck.columns == spark.columns
    assert duck.height == spark.height
    assert_frame_equal(
        normalise(spark), normalise(duck), check_exact=False, rel_tol=1e-9, abs_tol=1e-12
    )


@pytest.mark.parametrize("view", ["request_phases", "token_gaps", "kpi_latency"])
def test_public_views_equal_duckdb(engines, view):
    duck, spark = engines
    duck_rows = duck.query(f"SELECT * FROM {view}")
    assert duck_rows.height > 0
    assert_same_rows(duck_rows, spark.query(f"SELECT * FROM {view}"))


def test_playbook_symptoms_equal_duckdb(engines):
    duck, spark = engines
    materialise_rollups(duck)
    materialise_rollups(spark)
    by_id = load_catalog().by_id()
    fired = set()
    for pid in SYMPTOMS:
        pb = by_id[pid]
        sql = pb.symptom_sql
        params = bind(sql, pb.defaults())
        duck_rows = duck.query(sql, params)
        assert duck_rows.height > 0, pid
        assert_same_rows(duck_rows, spark.query(sql, params))
        if duck_rows["fired"].any():
            fired.add(pid)
    assert "prefill-interference" in fired  # the scenario's fault is found by both engines


def test_every_view_and_check_translates():
    """Every public view and every playbook query renders for Spark (no Spark needed)."""
    names = {n for n, _ in view_sql(lambda table: [c.name for c in TABLES[table]])}
    assert {"request_phases", "gap_context", "window_stats", "gpu_state"} <= names
    for pb in load_catalog().playbooks:
        queries = [pb.symptom_sql, pb.figures_sql, pb.examples_sql]
        queries += [r.sql for r in pb.requires]
        queries += [c.sql for c in pb.causes] + [r.sql for c in pb.causes for r in c.requires]
        queries += [q.sql for q in pb.evidence]
        for sql in filter(None, queries):
            assert not re.search(r"\$[a-z_]", to_spark(sql)), pb.id


def test_asof_join_becomes_interval_join():
    sql = to_spark(
        "SELECT g.ts, t.v FROM g ASOF LEFT JOIN t ON g.ts >= t.ts AND g.k = t.k", None, None
    )
    assert "ASOF JOIN" not in sql.upper()
    assert "LEAD(ts) OVER (PARTITION BY k ORDER BY ts" in sql
    assert "g.ts < t._asof_next OR t._asof_next IS NULL" in sql


def test_bad_query_is_a_query_error(engines):
    _, spark = engines
    with pytest.raises(QueryError, match=r"no_such_view|TABLE_OR_VIEW"):
        spark.query("SELECT * FROM no_such_view")


def test_run_playbook_gives_the_same_finding(engines):
    """The playbook engine through the executor seam: requires, symptom, figures, causes,
    evidence and examples of one playbook, run by each engine."""
    duck, spark = engines
    pb = load_catalog().by_id()["prefill-interference"]
    found = {}
    for name, executor in (("duckdb", duck), ("spark", spark)):
        materialise_rollups(executor)
        found[name] = run_playbook(executor, pb, pb.defaults()).to_dict()
    duck_f, spark_f = found["duckdb"], found["spark"]
    assert spark_f["status"] == duck_f["status"] == "fail"
    assert spark_f["message"] == duck_f["message"]
    assert spark_f["windows"] == duck_f["windows"]
    assert [(c["id"], c["status"], c["strength"]) for c in spark_f["causes"]] == [
        (c["id"], c["status"], c["strength"]) for c in duck_f["causes"]
    ]
    shape = [(e["id"], e["columns"], len(e["rows"])) for e in duck_f["evidence"]]
    assert [(e["id"], e["columns"], len(e["rows"])) for e in spark_f["evidence"]] == shape
    # Examples are the top 5 requests by their longest gap; requests stalled behind the same
    # prefill tie on it, and each engine breaks the tie its own way: same number only.
    assert len(spark_f["example_requests"]) == len(duck_f["example_requests"]) == 5
