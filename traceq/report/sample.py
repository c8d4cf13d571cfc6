"""The report's bounded samples in memory that does not grow with the dataset.

A sample is the `cap` rows with the smallest (hash, key) (report_sample_requests.sql,
report_sample_gaps.sql). `ORDER BY … LIMIT cap` gives it, but DuckDB picks its top-N operator
(a heap of `cap` rows) only when it expects many more rows than `cap`; otherwise it sorts the
whole input, which at 5 M chunk gaps holds ~0.5 GB. So the query first keeps the rows whose
hash is at most a threshold set for about `HASH_MARGIN` × `cap` of the `rows` to pass, and
sorts only those: the rows left out all hash above every row kept, so the first `cap` are the
same. Should fewer than `cap` pass (improbable), the threshold is raised until they do or it
lets every row through."""

from __future__ import annotations

from typing import Any

import polars as pl

from traceq.session import Session
from traceq.sql import load

HASH_MAX = 2**64 - 1
"""The largest value of DuckDB's `hash()` (UBIGINT)."""

HASH_MARGIN = 2.0
"""Rows let through per row wanted: 2 × 10 000 rows pass on average, and fewer than 10 000
of a uniform hash is ~70 standard deviations away; the sort over 20 000 rows is a few MB."""


def threshold(rows: int, cap: int, margin: float = HASH_MARGIN) -> int:
    """The hash threshold that lets about `margin` × `cap` of `rows` through (all of them
    when that is most of them)."""
    if rows <= 0 or margin * cap >= rows:
        return HASH_MAX
    return min(HASH_MAX, int(HASH_MAX * (margin * cap / rows)))


def bounded_sample(
    session: Session,
    name: str,
    params: dict[str, Any],
    rows: int,
    cap: int,
    margin: float = HASH_MARGIN,
) -> pl.DataFrame:
    """Run the sample query `name` (traceq/sql/NAME.sql) for its first `cap` rows of `rows`,
    sorting only about `margin` × `cap` of them."""
    while True:
        limit = threshold(rows, cap, margin)
        frame = session.query(load(name), {**params, "cap": cap, "max_hash": limit})
        if frame.height >= cap or limit == HASH_MAX:
            return frame
        margin *= 4
