"""SQL console: read-only DuckDB over the dataset (through the one Session), results capped,
CSV download, the error as one line; the views and their column docs beside it."""

import streamlit as st

from traceq.app import data, queries, router, state, ui
from traceq.session import QueryError

ctx = ui.context()
st.title("SQL console")
left, right = st.columns([3, 2])

with left:
    st.caption(
        "Read-only: queries only, no file but the dataset's own. `$since` and `$until` bind "
        f"the time filter (ns). At most {queries.CONSOLE_ROWS:,} rows are shown."
    )
    sql = st.text_area(
        "SQL",
        value="SELECT metric, n, p50, p90, p99, max FROM kpi_latency",
        height=160,
        key="console_sql",
    )
    if st.button("Run", type="primary", icon=":material/play_arrow:", key="console_run"):
        session = data.session(ctx.dataset)
        try:
            params = queries.console_params(session, sql, ctx.window)
            st.session_state["console_result"] = session.execute(
                sql,
                params,
                row_cap=queries.CONSOLE_ROWS,
                time_limit_s=queries.CONSOLE_TIME_LIMIT_S,
            )
            st.session_state["console_error"] = None
        except QueryError as exc:
            st.session_state["console_result"] = None
            st.session_state["console_error"] = router.one_line(exc)
    error = st.session_state.get("console_error")
    result = st.session_state.get("console_result")
    if error:
        st.error(error, icon=":material/block:")
    elif result is not None:
        more = " (more rows exist; the first ones are shown)" if result.truncated else ""
        st.caption(f"{result.frame.height:,} rows in {result.elapsed_s * 1000:,.0f} ms{more}.")
        st.dataframe(result.frame, hide_index=True, width="stretch")
        st.download_button(
            "Download CSV",
            result.frame.write_csv(),
            file_name="result.csv",
            mime="text/csv",
            icon=":material/download:",
        )

with right:
    catalog = data.catalog(ctx.dataset)
    names = catalog["name"].unique(maintain_order=True).to_list()
    default = names.index("request_phases") if "request_phases" in names else 0
    name = st.selectbox("Tables and views", names, index=default, key="console_relation")
    one = catalog.filter(catalog["name"] == name)
    st.caption(f"{one['kind'][0]}: {one['relation_doc'][0]}")
    st.dataframe(one.select("column", "type", "doc"), hide_index=True, width="stretch", height=420)
    st.caption(f"Time filter: {state.format_window(ctx.window)}")
