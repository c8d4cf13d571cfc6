"""The app's frame: page config, shared state, the sidebar, and `st.navigation` over the
pages in traceq/app/pages/. app.py (repo top) and traceq/app/streamlit_app.py call `run()`."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from traceq.app import sidebar, state
from traceq.session import QueryError

PAGES = Path(__file__).resolve().parent / "pages"


def _pages(open_: bool) -> dict[str, list[st.Page]]:
    home = st.Page(
        PAGES / "home.py",
        title="Open a dataset",
        icon=":material/folder_open:",
        url_path="open",
        default=not open_,
    )
    if not open_:
        return {"traceq": [home]}
    return {
        "Postmortem": [
            st.Page(
                PAGES / "overview.py",
                title="Overview",
                icon=":material/dashboard:",
                url_path="overview",
                default=True,
            ),
            st.Page(
                PAGES / "timeline.py",
                title="Timeline",
                icon=":material/timeline:",
                url_path="timeline",
            ),
            st.Page(
                PAGES / "phases.py",
                title="Phases",
                icon=":material/waterfall_chart:",
                url_path="phases",
            ),
            st.Page(
                PAGES / "findings.py",
                title="Findings",
                icon=":material/report:",
                url_path="findings",
            ),
            st.Page(
                PAGES / "requests.py",
                title="Requests",
                icon=":material/table_rows:",
                url_path="requests",
            ),
        ],
        "Query": [
            st.Page(
                PAGES / "console.py",
                title="SQL console",
                icon=":material/terminal:",
                url_path="sql",
            ),
        ],
        "Data": [home],
    }


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


def one_line(exc: BaseException) -> str:
    """The first line of an error's message (DuckDB's hints follow on later lines)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
