"""What a rendered page ships to the browser: the rows of data each chart and table carries,
read from the messages Streamlit would send (a `streamlit.testing` AppTest after its run).

The app's promise (docs/APP.md): aggregation happens in DuckDB and no chart or table ships more
than `ROW_BOUND` rows, whatever the dataset's size. tests/test_app.py checks it on a bundled
scenario on every run; bench/app_render.py checks it, and times the first render, on a
million-request dataset (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

ROW_BOUND = 5_000
"""Most rows one chart or table may ship to the browser ("a few thousand"): the timeline cuts
any window into at most 240 buckets per series, and tables page (50 rows) or list sources."""

UNCOUNTED = frozenset(
    {"plotly_chart", "deck_gl_json_chart", "bokeh_chart", "graphviz_chart", "pydeck_chart"}
)
"""Element types that carry data this module does not count: a page using one fails the check
instead of passing it unmeasured."""


@dataclass(frozen=True)
class Shipped:
    """One chart or table of a rendered page and the rows it carries to the browser."""

    kind: str
    """`chart` (Vega-Lite), `dataframe` or `table`."""
    label: str
    """The chart's title or the table's columns, to name it in a message."""
    rows: int


def _arrow_rows(data: bytes) -> int:
    return pa.ipc.open_stream(data).read_all().num_rows if data else 0


def _arrow_columns(data: bytes) -> str:
    names = pa.ipc.open_stream(data).schema.names if data else []
    return ", ".join(n for n in names if not n.startswith("__"))


def _title(spec: dict[str, Any]) -> str:
    """A chart's title: its own, or the first titled layer / panel's."""
    title = spec.get("title")
    if isinstance(title, dict):
        title = title.get("text")
    if isinstance(title, list):
        title = " ".join(str(t) for t in title)
    if title:
        return str(title)
    for key in ("layer", "vconcat", "hconcat", "concat"):
        for part in spec.get(key, []):
            if isinstance(part, dict) and (inner := _title(part)):
                return inner
    return ""


def _inline_rows(spec: Any) -> int:
    """Rows written into the spec itself (`data.values`, `datasets`), at any depth."""
    if isinstance(spec, list):
        return sum(_inline_rows(s) for s in spec)
    if not isinstance(spec, dict):
        return 0
    rows = 0
    for key, value in spec.items():
        if key == "values" and isinstance(value, list):
            rows += len(value)
        elif key == "datasets" and isinstance(value, dict):
            rows += sum(len(v) for v in value.values() if isinstance(v, list))
        else:
            rows += _inline_rows(value)
    return rows


def of_element(kind: str, proto: Any) -> Shipped | None:
    """The rows one element's message carries; None for an element without data."""
    if kind == "vega_lite_chart":
        spec = json.loads(proto.spec) if proto.spec else {}
        rows = sum(_arrow_rows(d.data.data) for d in proto.datasets)
        rows += _arrow_rows(proto.data.data) + _inline_rows(spec)
        return Shipped("chart", _title(spec) or "untitled chart", rows)
    if kind == "dataframe":
        data = proto.arrow_data.data
        rows = _arrow_rows(data)
        if proto.HasField("lazy_data"):  # paged from the server: it can ship every row
            data = data or proto.lazy_data.initial_chunk.data
            rows = max(rows, _arrow_rows(proto.lazy_data.initial_chunk.data))
            rows = max(rows, proto.lazy_data.row_count)
        return Shipped("dataframe", _arrow_columns(data) or "dataframe", rows)
    if kind == "table":
        data = proto.arrow_data.data
        return Shipped("table", _arrow_columns(data) or "table", _arrow_rows(data))
    if kind in UNCOUNTED:
        raise ValueError(f"a {kind} ships data that traceq.app.shipped does not count")
    return None


def of_page(nodes: Iterable[Any]) -> list[Shipped]:
    """Every chart and table among `nodes` (an AppTest's `main` and `sidebar`: each iterates
    over all its descendants)."""
    found = []
    for node in nodes:
        proto = getattr(node, "proto", None)
        if proto is None:
            continue
        item = of_element(getattr(node, "type", ""), proto)
        if item is not None:
            found.append(item)
    return found


def rendered(at: Any) -> list[Shipped]:
    """Every chart and table an AppTest `at` rendered on its current page."""
    return of_page([*at.main, *at.sidebar])


def over_bound(items: Iterable[Shipped], bound: int = ROW_BOUND) -> list[Shipped]:
    """The items shipping more than `bound` rows (empty when the page keeps its promise)."""
    return [i for i in items if i.rows > bound]
