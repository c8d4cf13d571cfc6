"""One SQL, two engines: the views and playbook checks written for DuckDB give the same rows
on Spark (traceq/spark/), row for row, floating point to 1e-9 relative.

Spark runs in local mode with two cores (Java from Debian's packages: tests/spark/setup.sh).
One SparkSession for the module keeps the JVM start-up to once.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import duckdb
import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from pyspark.sql import SparkSession
from sqlglot import exp

from tests.playbook_helpers import synth_dataset
from tests.s3_helpers import moto_s3, upload
from traceq.docs import VIEW_FILES
from traceq.playbooks import load_catalog
from traceq.playbooks.engine import run_playbook
from traceq.playbooks.rollups import materialise_rollups
from traceq.playbooks.values import bind
from traceq.schema import TABLES
from traceq.session import QueryError, Session
from traceq.spark import SparkExecutor, asof, view_sql
from traceq.spark.executor import LOCAL_DRIVER_MEMORY
from traceq.spark.translate import Macros, TranslationError, parse, to_spark, view_name
from traceq.sql import load

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
        # Local-mode settings for tiny data (docs/PERFORMANCE.md, "Test suite time"): adaptive
        # execution re-plans stage by stage, which costs more here than it saves. The JVM keeps
        # its default JIT (C2): most of this module's time is Spark analysing the nested views
        # (DeduplicateRelations over plans of thousands of nodes), which C1 alone ran ~3x slower.
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.driver.memory", LOCAL_DRIVER_MEMORY)  # the planner's heap
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")  # a JVM that ends says why
    try:
        with Session(ds) as duck, SparkExecutor(spark, ds) as sparked:
            yield duck, sparked
    finally:
        spark.stop()


@pytest.fixture(scope="module")
def materialised(engines):
    """The engines with the shared rollups cached once for the module, as `traceq diagnose`
    does once per run (the playbook tests below read them)."""
    duck, spark = engines
    materialise_rollups(duck)
    materialise_rollups(spark)
    return duck, spark


def normalise(frame: pl.DataFrame, other: pl.DataFrame) -> pl.DataFrame:
    """Comparable across engines: whole numbers as Int64 where both engines give an integer
    type (DuckDB's sums are HUGEINT, Spark's BIGINT), other numbers as Float64, timestamps at
    µs (Spark's precision), rows in a total order."""
    casts = []
    for name, dtype in frame.schema.items():
        col = pl.col(name)
        if dtype.is_integer() and other.schema[name].is_integer():
            casts.append(col.cast(pl.Int64))
        elif dtype.is_numeric():
            casts.append(col.cast(pl.Float64))
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
        normalise(spark, duck),
        normalise(duck, spark),
        check_exact=False,
        rel_tol=1e-9,
        abs_tol=1e-12,
    )


@pytest.mark.parametrize(
    "view",
    [
        "request_phases",
        "token_gaps",
        "kpi_latency",
        "_prefill_timeline",
        "gap_stalls",
        "gap_context",
        "request_gpu",
    ],
)
def test_public_views_equal_duckdb(engines, view):
    duck, spark = engines
    duck_rows = duck.query(f"SELECT * FROM {view}")
    assert duck_rows.height > 0
    assert_same_rows(duck_rows, spark.query(f"SELECT * FROM {view}"))


def test_register_takes_the_url_of_a_copy_in_object_storage(engines):
    """`register(spark, "s3://…", location=…)`: the manifest is read from the bucket (moto's
    S3, tests/s3_helpers.py), the files where the cluster reads them (here the folder, as a
    cluster would read `s3a://`), in a session of its own. `kpi_latency` reads `requests`
    and `tokens` through `request_phases` and the gap rollups; each view's rows on their own
    are test_public_views_equal_duckdb's (one view here: Spark analyses each for ~20 s)."""
    duck, spark = engines
    local = duck.dataset.root
    with moto_s3() as fs:
        url = upload(fs, local, "spark.tq")
        copy = SparkExecutor(spark.spark.newSession(), url, location=local.resolve().as_uri())
    assert copy.dataset.root == url and not copy.skipped
    sql = "SELECT * FROM kpi_latency"
    assert_same_rows(duck.query(sql), copy.query(sql))


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


def asof_views() -> list[str]:
    """The views whose DuckDB SQL has an as-of join (read from the SQL, not listed here)."""
    names = []
    for file in VIEW_FILES:
        for tree in parse(load(file)):
            joins = tree.find_all(exp.Join)
            name = view_name(tree)
            if name and any(str(j.args.get("method") or "").upper() == "ASOF" for j in joins):
                names.append(name)
    return names


def physical_plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def test_asof_joins_are_equi_joins_in_spark(engines):
    """At fleet scale neither side of an as-of join fits a broadcast: every one must still be
    planned as a hash or sort-merge join on equality keys, never a nested loop or a
    cartesian product over billions of chunks × the prefill timeline."""
    _, sparked = engines
    views = asof_views()
    assert {"gap_context", "gap_stalls"} <= set(views)
    spark = sparked.spark
    # Plans of the views themselves, not of cached rollups: nothing is cached yet when the
    # tests run in file order (the `materialised` tests come later); in another order the
    # later queries read the views uncached, the same rows, slower.
    spark.catalog.clearCache()
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        for view in views:
            plan = physical_plan(spark.table(view))
            assert "SortMergeJoin" in plan, view
            assert "_asof_bucket" in plan, view
            assert "BroadcastNestedLoopJoin" not in plan, view
            assert "CartesianProduct" not in plan, view
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")


WINDOW = re.compile(r"Window \[.*\], \[(?P<keys>[^\]]*)\], \[(?P<order>[^\]]*)\]$", re.M)
"""A Window operator's line in a plan string: `Window [functions], [partition keys], [order]`."""


def test_prefill_timeline_window_is_not_one_partition_per_engine(engines):
    """The running sum over first-token times (`_prefill_timeline`, traceq/sql/rollups.sql)
    is partitioned by engine and time bucket: on a dataset of one engine (most runs) Spark
    sorts and sums it in as many tasks as the cluster has, not in one task holding every
    first token of the run."""
    _, sparked = engines
    plan = physical_plan(sparked.spark.table("_prefill_timeline"))
    by_ts = [
        [key.split("#")[0] for key in keys.split(", ")]
        for keys, order in WINDOW.findall(plan)
        if order.startswith("ts#")
    ]
    assert by_ts, plan
    for keys in by_ts:
        assert keys[0] == "engine", plan
        assert len(keys) > 1, f"the running sum over ts is one partition per engine: {keys}"


ASOF_QUERIES = (
    "SELECT l.id, r.v FROM l ASOF LEFT JOIN r ON l.ts >= r.ts",
    "SELECT l.id, r.v, r.ts FROM l ASOF LEFT JOIN r ON r.ts <= l.ts - 7 AND l.k = r.k",
    "SELECT l.id, r.v FROM l ASOF JOIN r ON l.ts >= r.ts AND l.k = r.k",
)


def test_asof_join_rows_equal_duckdb(engines):
    """Edge cases the views' data may not reach: left rows before the first and after the
    last right row, keys whose rows end early, null times and keys, big idle stretches."""
    _, sparked = engines
    rng = np.random.default_rng(7)
    ts = rng.choice(np.arange(1_000, 200_000), 300, replace=False)  # no ties: one row wins
    keys = np.where(ts < 60_000, rng.choice(["a", "b", "c"], 300), rng.choice(["a", "b"], 300))
    right = [(int(t), str(k), i) for i, (t, k) in enumerate(zip(ts, keys, strict=True))]
    right += [(None, "a", -1), (500_000, None, -2)]  # a null time; the last row, keyless
    left = [
        (
            i,
            None if i % 97 == 0 else int(t),
            None if i % 89 == 0 else str(k),
        )
        for i, (t, k) in enumerate(
            zip(rng.integers(0, 600_000, 600), rng.choice(["a", "b", "c", "d"], 600), strict=True)
        )
    ]
    duck = duckdb.connect()
    spark = sparked.spark
    for name, rows, schema in (
        ("l", left, "id long, ts long, k string"),
        ("r", right, "ts long, k string, v long"),
    ):
        spark.createDataFrame(rows, schema=schema).createOrReplaceTempView(name)
        polars_schema = {
            c: pl.String if t == "string" else pl.Int64
            for c, t in (f.split() for f in schema.split(", "))
        }
        duck.register(name, pl.DataFrame(rows, schema=polars_schema, orient="row").to_arrow())
    for rows in (asof.COARSE_ROWS, 3):  # 3: a key's next row is often in a later partition
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(asof, "COARSE_ROWS", rows)
            for sql in ASOF_QUERIES:
                expected = duck.sql(sql).pl()
                assert expected.height > 0, sql
                assert_same_rows(expected, sparked.query(sql))


def test_asof_next_row_is_not_one_partition_per_key(engines):
    """The `lead` that gives each right row of an as-of join its interval is partitioned by
    the keys and a coarse time bucket (traceq/spark/asof.py): a fleet's engine with millions
    of first-token times is not sorted in one task. Only the hand-off between partitions,
    one row per partition, is one window per key."""
    _, sparked = engines
    plan = physical_plan(sparked.spark.table("gap_context"))
    windows = [[key.split("#")[0] for key in keys.split(", ")] for keys, _ in WINDOW.findall(plan)]
    over_rows = [keys for keys in windows if "_asof_part" in keys]
    assert over_rows, plan
    assert all(len(keys) > 1 for keys in over_rows), windows


def test_bad_query_is_a_query_error(engines):
    _, spark = engines
    with pytest.raises(QueryError, match=r"no_such_view|TABLE_OR_VIEW"):
        spark.query("SELECT * FROM no_such_view")


def test_playbook_symptoms_equal_duckdb(materialised):
    duck, spark = materialised
    by_id = load_catalog().by_id()
    queries = [
        (by_id[pid].symptom_sql, bind(by_id[pid].symptom_sql, by_id[pid].defaults()))
        for pid in SYMPTOMS
    ]
    # Two Spark queries at a time: much of each one's time is the driver analysing it on one
    # core, so the second core runs the other (the 5 queries: 16 s → 11 s on two idle cores).
    with ThreadPoolExecutor(2) as pool:
        spark_rows = list(pool.map(lambda query: spark.query(*query), queries))
    fired = set()
    for pid, (sql, params), sparked in zip(SYMPTOMS, queries, spark_rows, strict=True):
        duck_rows = duck.query(sql, params)
        assert duck_rows.height > 0, pid
        assert_same_rows(duck_rows, sparked)
        if duck_rows["fired"].any():
            fired.add(pid)
    assert "prefill-interference" in fired  # the scenario's fault is found by both engines


def test_run_playbook_gives_the_same_finding(materialised):
    """The playbook engine through the executor seam: requires, symptom, figures, causes,
    evidence and examples of one playbook, run by each engine."""
    duck, spark = materialised
    pb = load_catalog().by_id()["prefill-interference"]
    found = {}
    for name, executor in (("duckdb", duck), ("spark", spark)):
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
    # Evidence rows and examples are ordered to a key that ends unique (requests stalled
    # behind the same prefill tie on their longest gap): the same requests in the same order
    ids = [[r.get("request_id") for r in e["rows"]] for e in duck_f["evidence"]]
    assert [[r.get("request_id") for r in e["rows"]] for e in spark_f["evidence"]] == ids
    assert spark_f["example_requests"] == duck_f["example_requests"]
    assert len(duck_f["example_requests"]) == 5


def test_macro_arguments_keep_their_grouping():
    """A macro's argument is substituted as one operand: `_prefill_bucket(t_arrival +
    ttft_ns)` (traceq/sql/rollups.sql) divides the sum, not ttft_ns alone."""
    macros = Macros()
    macros.add(parse("CREATE MACRO bucket(ts) AS ts // 10")[0])
    assert "(a + b) DIV 10" in to_spark("SELECT bucket(a + b) FROM t", macros)
    assert to_spark("SELECT bucket(c) FROM t", macros) == "SELECT c DIV 10 FROM t"


def test_macros_inside_macros_are_expanded():
    """A macro called in another's argument or body is expanded too (views.sql
    `_latency_bucket(_ms_floor_ns(x))`): Spark has no macro to call."""
    macros = Macros()
    macros.add(parse("CREATE MACRO ns(v) AS floor(v * 1e6)")[0])
    macros.add(parse("CREATE MACRO bucket(ts) AS ts // 10")[0])
    macros.add(parse("CREATE MACRO both(v) AS bucket(ns(v)) + 1")[0])
    assert to_spark("SELECT bucket(ns(x)) FROM t", macros) == "SELECT FLOOR(x * 1e6) DIV 10 FROM t"
    assert to_spark("SELECT both(x) FROM t", macros) == "SELECT FLOOR(x * 1e6) DIV 10 + 1 FROM t"


def test_asof_join_reading_the_right_star_is_refused():
    """`r.*` would carry the rewrite's helper columns: refused with a message, not wrong."""
    with pytest.raises(TranslationError, match=r"t\.\*"):
        to_spark("SELECT t.* FROM g ASOF LEFT JOIN t ON g.ts >= t.ts")
    assert "_asof_bucket" in to_spark("SELECT g.*, t.v FROM g ASOF LEFT JOIN t ON g.ts >= t.ts")
