"""Requests: every request of the window, filtered, sorted and paged in DuckDB; a row opens
its waterfall."""

import math

import streamlit as st

from traceq.app import data, queries, ui

ctx = ui.context()
st.title("Requests")

cols = st.columns([3, 2, 2, 2, 1, 2])
id_like = cols[0].text_input("Request id contains", key="req_id_like")
min_e2e = cols[1].number_input(
    "e2e at least (ms)", min_value=0.0, value=0.0, step=100.0, key="req_min_e2e"
)
sort = cols[2].selectbox("Sort by", queries.SORT_COLUMNS, index=1, key="req_sort")
size = cols[3].selectbox("Rows per page", queries.PAGE_SIZES, index=1, key="req_size")
descending = cols[4].toggle("Desc.", value=True, key="req_desc")
errors_only = cols[5].toggle("Errors only", value=False, key="req_errors")
flt = queries.RequestFilter(id_like.strip(), float(min_e2e), errors_only, sort, descending)

_, total = data.requests_page(ctx.dataset, ctx.window, flt, 0, size)
pages = max(1, math.ceil(total / size))
page = (
    st.number_input(
        f"Page (of {pages:,})",
        min_value=1,
        max_value=pages,
        value=1,
        key=f"req_page_{hash(flt)}_{size}",
    )
    - 1
)
rows, total = data.requests_page(ctx.dataset, ctx.window, flt, int(page), size)
st.caption(f"{total:,} requests match; rows {page * size + 1:,}–{page * size + rows.height:,}.")

event = st.dataframe(
    rows,
    hide_index=True,
    width="stretch",
    on_select="rerun",
    selection_mode="single-row",
    key=f"req_table_{hash(flt)}_{page}_{size}",
    column_config={
        "arrival": st.column_config.DatetimeColumn(format="HH:mm:ss.SSS"),
        **{c: ui.MS_COLUMN for c in rows.columns if c.endswith("_ms")},
    },
)
picked = event.selection.rows if event else []
if picked:
    rid = rows["request_id"][picked[0]]
    if st.button(f"Open the waterfall of {rid}", icon=":material/waterfall_chart:"):
        ui.go("phases", request=rid)
else:
    st.caption("Select a row to open its waterfall.")
