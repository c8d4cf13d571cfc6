"""Rows to text for the terminal: an aligned table, CSV or JSON lines."""

from __future__ import annotations

import polars as pl

TABLE_MAX_ROWS = 200


def render_frame(
    frame: pl.DataFrame, fmt: str, *, header: bool = True, width: int | None = None
) -> str:
    """`frame` as `table`, `csv` or `json` (one object per line) text, newline-terminated.

    `header=False` leaves out the CSV header (for the second and later batches of a stream);
    `width` fits a table to that many characters, eliding long text.
    """
    if fmt == "csv":
        return frame.write_csv(include_header=header)
    if fmt == "json":
        return frame.write_ndjson()
    with pl.Config(
        tbl_rows=TABLE_MAX_ROWS,
        tbl_cols=-1,
        tbl_width_chars=width or 10_000,
        fmt_str_lengths=80 if width is None else max(12, width // max(frame.width, 1)),
        tbl_hide_dataframe_shape=True,
        tbl_hide_column_data_types=True,
        float_precision=3,
        tbl_formatting="ASCII_MARKDOWN",
    ):
        text = str(frame)
    more = frame.height - TABLE_MAX_ROWS
    tail = f"\n({frame.height:,} rows; first {TABLE_MAX_ROWS} shown)" if more > 0 else ""
    return text + tail + "\n"
