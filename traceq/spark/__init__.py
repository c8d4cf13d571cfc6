"""The dataset on Apache Spark: the same tables, views and playbooks, run by Spark SQL.

`register(spark, DATASET)` registers every table (the Parquet files the manifest lists), the
`sources` view and every public view (traceq/sql/*.sql, rendered for Spark by
traceq/spark/translate.py) as temporary views of a SparkSession (traceq/spark/catalog.py).
`SparkExecutor` (traceq/spark/executor.py) runs the playbook engine's queries there (`traceq
diagnose DATASET --engine spark`). pyspark is an optional dependency (`pip install
'traceq[spark]'`) and Spark needs a Java 17+ runtime.

>>> from pyspark.sql import SparkSession                               # doctest: +SKIP
>>> spark = SparkSession.builder.getOrCreate()                         # doctest: +SKIP
>>> traceq.spark.register(spark, "run.tq")                             # doctest: +SKIP
>>> spark.sql("SELECT metric, p99 FROM kpi_latency").show()            # doctest: +SKIP
"""

from __future__ import annotations

from traceq.spark.catalog import Registered, register, view_sql
from traceq.spark.executor import SparkExecutor, spark_session
from traceq.spark.translate import TranslationError

__all__ = [
    "Registered",
    "SparkExecutor",
    "TranslationError",
    "register",
    "spark_session",
    "view_sql",
]
