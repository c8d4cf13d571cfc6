"""The app's frame: page config, shared state, the sidebar, and `st.navigation` over the
pages in traceq/app/pages/. app.py (repo top) and traceq/app/streamlit_app.py call `run()`."""

from __future__ import annotations

import html
import json
from pathlib import Path

import streamlit as st

from traceq.app import sidebar, state
from traceq.session import QueryError

PAGES = Path(__file__).resolve().parent / "pages"


PAGE_LIST = (
    # (section, file, title, icon, url path)
    ("Postmortem", "overview", "Overview", "dashboard", "overview"),
    ("Postmortem", "timeline", "Timeline", "timeline", "timeline"),
    ("Postmortem", "phases", "Phases", "waterfall_chart", "phases"),
    ("Postmortem", "findings", "Findings", "report", "findings"),
    ("Postmortem", "requests", "Requests", "table_rows", "requests"),
    ("Capacity", "whatif", "What if", "speed", "whatif"),
    ("Query", "console", "SQL console", "terminal", "sql"),
)


def _pages(open_: bool) -> dict[str, list[st.Page]]:
    """Every page; without an open dataset only "Open a dataset" is listed (the others stay
    hidden, so a link or a switch to them still resolves once a dataset is chosen)."""
    sections: dict[str, list[st.Page]] = {}
    for section, file, title, icon, path in PAGE_LIST:
        sections.setdefault(section, []).append(
            st.Page(
                PAGES / f"{file}.py",
                title=title,
                icon=f":material/{icon}:",
                url_path=path,
                default=open_ and file == "overview",
                visibility="visible" if open_ else "hidden",
            )
        )
    home = st.Page(
        PAGES / "home.py",
        title="Open a dataset",
        icon=":material/folder_open:",
        url_path="open",
        default=not open_,
    )
    sections["Data"] = [home]
    return sections


def run() -> None:
    """Route to the page in the URL; every page sees the same dataset and time window."""
    st.set_page_config(page_title="traceq", page_icon=":material/troubleshoot:", layout="wide")
    state.sync()
    dataset = state.dataset()
    page = st.navigation(_pages(dataset is not None))
    if dataset is not None:
        try:
            sidebar.render(dataset)
        except QueryError as exc:
            st.error(f"{dataset}: {one_line(exc)}")
            state.put("dataset", None)
            st.stop()
    try:
        page.run()
    except QueryError as exc:
        st.error(one_line(exc))
    mark_rendered(page.url_path)


RENDERED = "data-traceq-rendered"
"""Attribute of the hidden marker the last element of every completed run carries."""


def mark_rendered(url_path: str) -> None:
    """End the run with a hidden marker naming the page and the URL parameters it drew.

    A run cut short by `st.rerun()` or `st.switch_page()` (a brush, a link) never gets here,
    so its predecessor's marker stays on the page, naming another URL; a page whose marker
    matches the address bar while no script runs is complete. tests/browser/ waits on that
    instead of guessing how long the rerun after a rerun takes."""
    query = json.dumps(dict(sorted(st.query_params.to_dict().items())))
    st.sidebar.html(
        f'<span hidden {RENDERED}="1" data-page="{html.escape(url_path)}" '
        f'data-query="{html.escape(query)}"></span>'
    )


def one_line(exc: BaseException) -> str:
    """The first line of an error's message (DuckDB's hints follow on later lines)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
