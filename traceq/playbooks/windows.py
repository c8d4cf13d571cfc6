"""Turn a symptom's per-window rows into incidents: adjacent fired windows merge.

>>> import polars as pl
>>> rows = pl.DataFrame({"ts": [0, 10, 20, 30, 40], "ts_end": [10, 20, 30, 40, 50],
...                      "fired": [True, True, False, True, None], "score": [1.0, 3.0, 0, 2, 0]})
>>> [(w["start"], w["end"], w["score"], w["n_windows"]) for w in merge_windows(rows, gap=0)]
[(0, 20, 3.0, 2), (30, 40, 2.0, 1)]
>>> [(w["start"], w["end"], w["n_windows"]) for w in merge_windows(rows)]
[(0, 40, 3)]
"""

from __future__ import annotations

from typing import Any

import polars as pl

REQUIRED = ("ts", "ts_end", "fired")


GAP_WINDOWS = 1
"""Quiet windows an incident may contain: engine stats come every 5-10 s, so a window can
hold a single snapshot taken just after the engine drained; one quiet window between two
fired ones does not end the incident (Prometheus' `for` smooths the same way)."""


def merge_windows(frame: pl.DataFrame, gap: int = GAP_WINDOWS) -> list[dict[str, Any]]:
    """Incidents `{start, end, score, n_windows}` (ns) from rows with ts, ts_end, fired.

    A fired window that starts at most `gap` window lengths after the previous fired one
    ends extends it; the incident's score is its windows' highest `score` (null when the
    symptom gives none).
    """
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        msg = f"symptom query must return columns {', '.join(REQUIRED)}; missing {missing}"
        raise ValueError(msg)
    score = pl.col("score").cast(pl.Float64) if "score" in frame.columns else pl.lit(None)
    fired = (
        frame.filter(pl.col("fired").fill_null(False))
        .select(pl.col("ts").cast(pl.Int64), pl.col("ts_end").cast(pl.Int64), score.alias("score"))
        .sort("ts")
    )
    if fired.is_empty():
        return []
    slack = (pl.col("ts_end") - pl.col("ts")) * gap
    previous_end = pl.col("ts_end").cum_max().shift(1)
    incident = (pl.col("ts") > previous_end + slack).fill_null(True).cum_sum()
    merged = (
        fired.with_columns(incident.alias("incident"))
        .group_by("incident", maintain_order=True)
        .agg(
            start=pl.col("ts").min(),
            end=pl.col("ts_end").max(),
            score=pl.col("score").max(),
            n_windows=pl.len(),
        )
        .drop("incident")
    )
    return merged.to_dicts()
