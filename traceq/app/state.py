"""The app's shared state: which dataset is open, the time window the timeline's brush set,
and the request chosen for the waterfall. Each lives in `st.session_state` (so it survives a
page change) and in the URL (`st.query_params`), so a copied link reproduces the view:
`?dataset=/data/inc.tq&since=2025-06-15T10:00:05Z&until=2025-06-15T10:00:20Z&request=cmpl-1`.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

import streamlit as st

from traceq.app.queries import TimeRange, Window

KEYS = ("dataset", "since", "until", "request")
ENV_DATASET = "TRACEQ_DATASET"
ENV_FINDINGS = "TRACEQ_FINDINGS"
ENV_GPU = "TRACEQ_GPU"


# -- time stamps in the URL ----------------------------------------------------------------
def format_ts(ns: int) -> str:
    """`ns` since the epoch as ISO-8601 UTC (`2025-06-15T10:00:05.25Z`), to the µs."""
    seconds, rest = divmod(int(ns), 1_000_000_000)
    stamp = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    micros = rest // 1_000
    fraction = f".{micros:06d}".rstrip("0").rstrip(".") if micros else ""
    return f"{stamp}{fraction}Z"


def parse_ts(text: str) -> int:
    """ns since the epoch from ISO-8601 (naive = UTC) or an integer of ns; ValueError if neither."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    when = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp()) * 1_000_000_000 + when.microsecond * 1_000


def format_window(window: Window) -> str:
    """`10:00:05.250 – 10:00:20 UTC (15.0 s)` for the sidebar."""

    def short(ns: int) -> str:
        return format_ts(ns)[11:].removesuffix("Z")

    day = format_ts(window.since)[:10]
    return f"{day} {short(window.since)} – {short(window.until)} UTC ({window.seconds:,.1f} s)"


# -- command line ----------------------------------------------------------------------------
def cli_args() -> argparse.Namespace:
    """`streamlit run app.py -- [DATASET] [--findings FILE] [--gpu NAME]`; the environment
    fills gaps."""
    parser = argparse.ArgumentParser(prog="app.py", add_help=False)
    parser.add_argument("dataset", nargs="?")
    parser.add_argument("--findings")
    parser.add_argument("--gpu")
    # Only a script started by `streamlit run` owns sys.argv (under AppTest it is pytest's).
    own = Path(sys.argv[0]).name in ("app.py", "streamlit_app.py") if sys.argv else False
    args, _ = parser.parse_known_args(sys.argv[1:] if own else [])
    args.dataset = args.dataset or os.environ.get(ENV_DATASET) or None
    args.findings = args.findings or os.environ.get(ENV_FINDINGS) or None
    args.gpu = args.gpu or os.environ.get(ENV_GPU) or None
    return args


# -- the shared keys -----------------------------------------------------------------------
def sync() -> None:
    """Once per run, before the page: the URL wins when it names a key (a pasted link),
    otherwise the session's value is written back to the URL (a page change cleared it)."""
    for key in KEYS:
        if key in st.query_params:
            st.session_state[f"tq_{key}"] = st.query_params[key]
        elif st.session_state.get(f"tq_{key}") is not None:
            st.query_params[key] = st.session_state[f"tq_{key}"]
    if st.session_state.get("tq_dataset") is None:
        default = cli_args().dataset
        if default:
            put("dataset", default)


def get(key: str) -> str | None:
    return st.session_state.get(f"tq_{key}")


def put(key: str, value: str | None) -> None:
    """Set (or with None, drop) a shared key in the session and the URL."""
    if value is None:
        st.session_state.pop(f"tq_{key}", None)
        if key in st.query_params:
            del st.query_params[key]
        return
    st.session_state[f"tq_{key}"] = value
    st.query_params[key] = value


def dataset() -> str | None:
    return get("dataset")


def open_dataset(path: str) -> None:
    """Switch to another dataset: its window and request start afresh."""
    for key in ("since", "until", "request"):
        put(key, None)
    put("dataset", path)


def window(time_range: TimeRange) -> Window | None:
    """The window in force: the brushed one from the URL / session, else the default."""
    since, until = get("since"), get("until")
    if since and until:
        try:
            chosen = Window(parse_ts(since), parse_ts(until))
        except ValueError:
            st.warning(f"ignoring the window in the link: {since} – {until} is not a time range")
        else:
            if chosen.until > chosen.since:
                return chosen
    return time_range.default


def brushed() -> bool:
    return bool(get("since") and get("until"))


def set_window(window: Window) -> None:
    put("since", format_ts(window.since))
    put("until", format_ts(window.until))


def clear_window() -> None:
    put("since", None)
    put("until", None)
