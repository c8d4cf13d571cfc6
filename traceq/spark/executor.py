"""`SparkExecutor`: the playbook engine's queries run by Spark SQL instead of DuckDB.

It offers what traceq/playbooks/engine.py asks of its executor (`query`, `execute`,
`materialise`, `dataset`, `manifest`), like `traceq.session.Session` does for DuckDB: each
DuckDB statement is rendered for Spark (traceq/spark/translate.py, cached per text), its
`$name` parameters are bound as Spark named parameters, and every failure (translation,
analysis, execution) becomes `QueryError`, so a playbook whose query fails is reported as
`error` and the others still run.
"""

from __future__ import annotations

import functools
import os
import time
from typing import TYPE_CHECKING, Any

import polars as pl

from traceq.playbooks.rollups import CACHED_ON_SPARK  # cached by `materialise`, in order
from traceq.remote import AnyDataset
from traceq.session import DEFAULT_ROW_CAP, QueryError, Results
from traceq.spark.catalog import register
from traceq.spark.translate import TranslationError, to_spark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

LOCAL_SHUFFLE_PARTITIONS = 8
"""Shuffle partitions in local mode: Spark's default of 200 is sized for clusters, and on one
machine each partition is a task whose start-up dominates at traceq's rollup sizes."""

LOCAL_DRIVER_MEMORY = "2g"
"""Heap of the local-mode JVM, unless `SPARK_DRIVER_MEMORY` says otherwise: analysing and
planning traceq's nested views takes the heap, not the data (the playbook checks of a
200-request dataset run out of heap at 512 MB, and Spark's default of 1 GB ran out once in a
test run). Spark ends its JVM when a task runs out of heap in local mode."""


def spark_session(app_name: str = "traceq") -> SparkSession:
    """The SparkSession of the usual Spark configuration: `SPARK_REMOTE` (Spark Connect),
    `spark-submit --master ...` or spark-defaults.conf; local mode on this machine when none
    is set. Timestamps are read and shown in UTC, as DuckDB does."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if not os.environ.get("SPARK_REMOTE") and "--master" not in os.environ.get(
        "PYSPARK_SUBMIT_ARGS", ""
    ):
        builder = builder.config("spark.master", os.environ.get("MASTER", "local[*]"))
        builder = builder.config("spark.sql.shuffle.partitions", str(LOCAL_SHUFFLE_PARTITIONS))
        memory = os.environ.get("SPARK_DRIVER_MEMORY", LOCAL_DRIVER_MEMORY)
        builder = builder.config("spark.driver.memory", memory)
    return (
        builder.config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")  # stdout carries the findings
        .getOrCreate()
    )


class SparkExecutor:
    """A dataset registered in a SparkSession, queried like `traceq.session.Session`."""

    def __init__(
        self,
        spark: SparkSession,
        dataset: str | os.PathLike[str] | AnyDataset,
        *,
        location: str | None = None,
        row_cap: int = DEFAULT_ROW_CAP,
    ) -> None:
        self.spark = spark
        self.row_cap = row_cap
        try:
            registered = register(spark, dataset, location=location)
        except Exception as exc:  # py4j and Spark analysis errors have no common base
            raise QueryError(_message(exc)) from exc
        self.dataset = registered.dataset
        self.skipped = registered.skipped
        self.manifest = self.dataset.manifest()
        self._cached: list[str] = []

    def __enter__(self) -> SparkExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Drop the cached rollups (the SparkSession stays the caller's)."""
        for name in self._cached:
            self.spark.catalog.uncacheTable(name)
        self._cached = []

    def materialise(self) -> dict[str, float]:
        """Cache the shared rollups once, like traceq/playbooks/rollups.py does in DuckDB:
        `CACHE TABLE` computes each view now and later queries read the cached rows."""
        timings: dict[str, float] = {}
        for name in CACHED_ON_SPARK:
            started = time.perf_counter()
            try:
                self.spark.sql(f"CACHE TABLE {name}")  # names of ours, not input
            except Exception as exc:
                raise QueryError(f"rollup {name}: {_message(exc)}") from exc
            self._cached.append(name)
            timings[name] = time.perf_counter() - started
        return timings

    def frame(self, sql: str, params: dict[str, Any] | None = None) -> DataFrame:
        """The Spark DataFrame of one DuckDB statement (not yet run)."""
        try:
            return self.spark.sql(spark_text(sql), args=params or None)
        except TranslationError as exc:
            raise QueryError(f"no Spark rendering: {exc}") from exc
        except Exception as exc:
            raise QueryError(_message(exc)) from exc

    def query(self, sql: str, params: dict[str, Any] | None = None) -> pl.DataFrame:
        """All rows of one read statement; more than the row cap is an error (as Session)."""
        return self.execute(sql, params, truncate=False).frame

    def execute(
        self,
        sql: str,
        params: dict[str, Any] | None = None,
        *,
        truncate: bool = True,
        row_cap: int | None = None,
        time_limit_s: float | None = None,
    ) -> Results:
        """Run one read statement; keep at most `row_cap` rows (`Session.execute`'s contract;
        the time limit is Spark's own, `spark.sql.execution.timeout` and the cluster's)."""
        cap = row_cap or self.row_cap
        started = time.perf_counter()
        df = self.frame(sql, params)
        try:
            frame = _to_polars(df.limit(cap + 1))
        except Exception as exc:
            raise QueryError(_message(exc)) from exc
        truncated = frame.height > cap
        if truncated and not truncate:
            msg = f"the result has more than {cap:,} rows; aggregate or add a LIMIT"
            raise QueryError(msg)
        return Results(frame.head(cap), truncated, time.perf_counter() - started, sql)


@functools.lru_cache(maxsize=1024)
def spark_text(sql: str) -> str:
    """`sql` (DuckDB) rendered for Spark, once per distinct text."""
    return to_spark(sql)


def _to_polars(df: DataFrame) -> pl.DataFrame:
    if hasattr(df, "toArrow"):  # pyspark >= 4.0
        return pl.from_arrow(df.toArrow())  # type: ignore[return-value]
    return pl.from_pandas(df.toPandas())


def _message(exc: BaseException) -> str:
    """The first line of Spark's message (the rest is the analysed plan)."""
    text = str(getattr(exc, "desc", None) or exc).strip().splitlines() or [type(exc).__name__]
    return text[0][:500]
