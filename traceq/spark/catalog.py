"""The dataset registered in a SparkSession: every table (the Parquet files the manifest lists),
the `sources` view and every public view (traceq/sql/*.sql, rendered for Spark by
traceq/spark/translate.py) as temporary views (`register`). `SparkExecutor`
(traceq/spark/executor.py) queries what this registers.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traceq import pick
from traceq.db import PICK_SCHEMA, sources_frame, token_views
from traceq.docs import VIEW_FILES
from traceq.remote import AnyDataset, RemoteDataset, open_dataset
from traceq.schema import TABLES, empty
from traceq.spark.translate import (
    Columns,
    Macros,
    TranslationError,
    is_macro,
    parse,
    to_spark,
    view_name,
)
from traceq.sql import load

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass
class Registered:
    """What `register` put into the SparkSession."""

    dataset: AnyDataset
    views: list[str]
    skipped: dict[str, str] = field(default_factory=dict)
    """Views Spark refused (name → first line of Spark's message); queries on them fail."""


def register(
    spark: SparkSession,
    dataset: str | os.PathLike[str] | AnyDataset,
    *,
    location: str | None = None,
) -> Registered:
    """Register the dataset's tables and public views as temporary views of `spark`.

    The manifest is read here (the driver), from a local folder or a URL in object storage
    (`s3://bucket/run.tq`, traceq/remote.py); Spark reads the files it lists. `location` is
    where the cluster reads the dataset folder when that differs, e.g. `s3a://bucket/run.tq`
    where Hadoop's S3 connector is `s3a` (file paths are taken relative to the dataset root
    and joined to it).
    """
    ds = open_dataset(dataset)
    manifest = ds.manifest()
    base = location.rstrip("/") if location else None
    root = f"{ds.root}/" if isinstance(ds, RemoteDataset) else f"{ds.root.as_posix()}/"

    def uri(path: Path | str) -> str:
        text = path if isinstance(path, str) else path.as_posix()
        return f"{base}/{text.removeprefix(root)}" if base else text

    for table in TABLES:
        _parquet(spark, table, [uri(p) for p in ds.table_files(table)]).createOrReplaceTempView(
            table
        )
    spark.createDataFrame(sources_frame(manifest).to_pandas()).createOrReplaceTempView("sources")
    entry = pick.current(manifest)
    pick_file = ds.pick_file(entry) if entry is not None else None
    if entry is None or pick_file is None:
        if pick.request_sources(manifest):
            msg = (
                f"{ds.root}: which row stands for each request is not settled in the manifest "
                "(a dataset written by an older traceq); run `traceq ingest` on it once"
            )
            raise TranslationError(msg)
        spark.createDataFrame([], _pick_schema(spark)).createOrReplaceTempView("_request_pick")
        modes: dict[str, dict[str, str]] = {}
    else:
        pick_rows = spark.read.schema(_pick_schema(spark)).parquet(uri(pick_file))
        pick_rows.createOrReplaceTempView("_request_pick")
        modes = entry["sources"]
    for name, table, rels in token_views(manifest, modes):
        paths = [uri(ds.path_of(rel)) for rel in rels]
        _parquet(spark, table, paths).createOrReplaceTempView(name)
    skipped: dict[str, str] = {}
    with _analysed_views(spark):
        views = view_sql(lambda v: spark.table(v).columns, spark, skipped)
    return Registered(ds, [name for name, _ in views if name not in skipped], skipped)


def view_sql(
    columns: Columns | None = None,
    spark: SparkSession | None = None,
    skipped: dict[str, str] | None = None,
) -> list[tuple[str, str]]:
    """(view, Spark SQL) of every public view, in dependency order. With `spark`, each view
    is created as it is rendered, so a later `* EXCLUDE` can ask for earlier views' columns;
    a view Spark refuses goes into `skipped` (or raises when that is None) and the others
    are still created."""
    out: list[tuple[str, str]] = []
    macros = Macros()
    for file in VIEW_FILES:
        for tree in parse(load(file)):
            if is_macro(tree):
                macros.add(tree)  # type: ignore[arg-type]
                continue
            name = view_name(tree)
            if name is None:
                msg = f"traceq/sql/{file}.sql: only CREATE VIEW and CREATE MACRO translate"
                raise TranslationError(msg)
            try:
                sql = to_spark(tree, macros, columns)
                if spark is not None:
                    spark.sql(sql)
            except Exception as exc:  # translation, or Spark's analysis of the view
                if skipped is None:
                    raise
                skipped[name] = _first_line(exc)
                continue
            out.append((name, sql))
    return out


STORE_ANALYSED_VIEWS = "spark.sql.legacy.storeAnalyzedPlanForView"
"""Spark SQL setting, on while `register` creates the views: each temporary view keeps its
analysed plan instead of its SQL text. With the text (Spark's default), every reference to
a view analyses it again, and traceq's views read views that read views (window_stats reads
diag_window and chunk_gaps, which read token_gaps, which reads request_phases...): a playbook
query was analysed for seconds, most of a diagnose run on small data (docs/SCALE.md, "What
is checked"). The views are created together, in dependency order, from tables registered
just before, so a stored plan is what the text would give."""


@contextmanager
def _analysed_views(spark: SparkSession) -> Iterator[None]:
    """`STORE_ANALYSED_VIEWS` on for the block; the session's own value afterwards."""
    before = spark.conf.get(STORE_ANALYSED_VIEWS, None)
    spark.conf.set(STORE_ANALYSED_VIEWS, "true")
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(STORE_ANALYSED_VIEWS)
        else:
            spark.conf.set(STORE_ANALYSED_VIEWS, before)


def _first_line(exc: BaseException) -> str:
    lines = str(getattr(exc, "desc", None) or exc).strip().splitlines()
    return lines[0][:500] if lines else type(exc).__name__


def _parquet(spark: SparkSession, table: str, paths: list[str]) -> DataFrame:
    """The table's rows from `paths` with the table's schema (missing columns null), or an
    empty table of that schema."""
    schema = _table_schema(spark, table)
    if not paths:
        return spark.createDataFrame([], schema)
    # the manifest lists every file: no partition discovery from day=/instance= folders
    return spark.read.schema(schema).option("recursiveFileLookup", "true").parquet(*paths)


def _table_schema(spark: SparkSession, table: str) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(empty(table).to_arrow().schema)


def _pick_schema(spark: SparkSession) -> Any:
    import polars as pl
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(pl.DataFrame(schema=PICK_SCHEMA).to_arrow().schema)
