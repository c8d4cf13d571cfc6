"""The two-table summary CSV of GenAI-Perf and AIPerf.

`Metric,avg,min,max,p99,…` rows (the unit in the metric name: `Time to First Token (ms)`), a
blank line, then `Metric,Value` rows. CRLF line ends; GenAI-Perf quotes numbers ≥ 1000 with
thousands separators (`"2,843.72"`). The files are a few KB, so the csv module reads them.
"""

from __future__ import annotations

import csv
import io
import re

from traceq.ingest.loadtest.common import Run, stat_name

_UNIT = re.compile(r"^(?P<name>.*?)\s*\((?P<unit>[^()]*)\)\s*$")


def looks_like(text: bytes) -> bool:
    return text.startswith((b"Metric,avg,", b"\xef\xbb\xbfMetric,avg,"))


def read(data: bytes, tool: str, run: Run) -> None:
    """Add every figure of the CSV to `run.metrics` (statistic `value` for the scalar table)."""
    text = data.decode("utf-8-sig", "replace")
    header: list[str] | None = None
    for number, row in enumerate(csv.reader(io.StringIO(text)), 1):
        if not row or not any(cell.strip() for cell in row):
            header = None
            continue
        if row[0].strip() == "Metric":
            header = [c.strip() for c in row]
            continue
        if header is None or len(row) != len(header):
            run.reject(f"line {number}", "row does not match its table header", ",".join(row))
            continue
        m = _UNIT.match(row[0].strip())
        name, unit = (m["name"], m["unit"]) if m else (row[0].strip(), None)
        for column, cell in zip(header[1:], row[1:], strict=True):
            stat = "value" if column == "Value" else stat_name(column)
            value = _number(cell)
            if stat is None:
                run.unknown(f"column {column}")
            elif value is not None:
                run.metric(tool, name, stat, value, unit)


def _number(cell: str) -> float | None:
    cell = cell.strip().replace(",", "")
    if not cell:
        return None
    try:
        return float(cell)
    except ValueError:
        return None
