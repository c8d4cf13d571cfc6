"""What the playbook engine runs its queries through (traceq/playbooks/engine.py).

`traceq.session.Session` (DuckDB) is the default executor; `traceq.spark.SparkExecutor` runs
the same DuckDB SQL on Spark (`traceq diagnose --engine spark`). Both raise
`traceq.session.QueryError` for any failing statement.
"""

from __future__ import annotations

from typing import Any, Protocol

import polars as pl

from traceq.remote import AnyDataset
from traceq.session import Results


class Executor(Protocol):
    """Runs one read statement (DuckDB dialect, `$name` parameters) over a dataset."""

    manifest: dict[str, Any]

    @property
    def dataset(self) -> AnyDataset: ...

    def query(self, sql: str, params: dict[str, Any] | None = None) -> pl.DataFrame: ...

    def execute(
        self,
        sql: str,
        params: dict[str, Any] | None = None,
        *,
        truncate: bool = True,
        row_cap: int | None = None,
        time_limit_s: float | None = None,
    ) -> Results: ...
