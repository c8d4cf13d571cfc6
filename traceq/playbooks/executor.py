"""What the playbook engine runs its queries through (traceq/playbooks/engine.py).

`traceq.session.Session` (DuckDB) is the default executor; `traceq.spark.SparkExecutor` runs
the same DuckDB SQL on Spark (`traceq diagnose --engine spark`). Both raise
`traceq.session.QueryError` for any failing statement.
"""

from __future__ import annotations

from typing import Any, Protocol

import polars as pl

from traceq.remote import AnyDataset
from traceq.session import Results, Session


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


def materialise_rollups(executor: Executor) -> dict[str, float]:
    """Compute the shared rollups once per run: Parquet files and views for a `Session`
    (traceq/playbooks/rollups.py), the executor's own `materialise` otherwise."""
    if isinstance(executor, Session):
        from traceq.playbooks.rollups import materialise

        return materialise(executor)
    return executor.materialise()  # type: ignore[attr-defined, no-any-return]
