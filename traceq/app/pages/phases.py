"""Phases: where the time went (tokenize / queue / prefill / decode / residual) by arrival
window and by length, and one request's waterfall with its token ticks and stalls."""

import streamlit as st

from traceq.app import charts, data, queries, state, ui

ctx = ui.context()
w = ctx.window

st.title("Phases")
by_window = data.series(ctx.dataset, w, "phases")
if by_window.is_empty():
    ui.empty_note("requests")
else:
    ui.brushable(charts.phase_stack_time(by_window, window=w), "phases_time", w)

by = (
    st.segmented_control("Length bucket", ["prompt", "output"], default="prompt", key="phases_by")
    or "prompt"
)
by_length = data.phases_by_length(ctx.dataset, w, by)
if by_length.is_empty():
    st.caption(f"No {by} lengths recorded for the requests of this window.")
else:
    st.altair_chart(charts.phase_stack_length(by_length, by=by), width="stretch")

st.header("Request waterfall")
slowest = data.slowest_requests(ctx.dataset, w)
options = slowest["request_id"].to_list()
chosen = state.get("request")
if chosen and chosen not in options:
    options.insert(0, chosen)
if not options:
    ui.empty_note("requests")
    st.stop()
picked = st.selectbox(
    "Request (the 50 slowest of the window, by e2e)",
    options,
    index=options.index(chosen) if chosen in options else 0,
    key=f"phases_request_{chosen}",
)
if picked != chosen:
    state.put("request", picked)

req = data.request(ctx.dataset, picked)
if req is None:
    st.warning(f"No request {picked!r} in this dataset.")
    st.stop()
tokens = data.request_tokens(ctx.dataset, picked)
cols = st.columns(6)
cols[0].metric("TTFT", ui.ms(req["ttft_ms"]))
cols[1].metric("TPOT", ui.ms(req["tpot_ms"]))
cols[2].metric("e2e", ui.ms(req["e2e_ms"]))
cols[3].metric("Prompt tokens", ui.num(req["prompt_tokens"], ",.0f"))
cols[4].metric("Output tokens", ui.num(req["output_tokens"], ",.0f"))
stalls = int(tokens["stall"].sum()) if tokens.height else 0
cols[5].metric(
    "Stalls",
    f"{stalls:,}",
    help=f"Gaps longer than max({queries.STALL_FACTOR:g} × the request's median gap, "
    f"{queries.STALL_FLOOR_MS:g} ms).",
)
hops = data.request_hops(ctx.dataset, picked)
st.altair_chart(charts.waterfall(req, tokens, hops), width="stretch")
notes = []
if tokens.is_empty():
    notes.append("no token timings for this request (no streamed chunks in its sources)")
if req.get("error"):
    notes.append(f"error: {req['error']}")
if req.get("residual_ms") and abs(req["residual_ms"]) > 1:
    notes.append(f"{ui.ms(req['residual_ms'])} of e2e no stamp explains (residual)")
if notes:
    st.caption("; ".join(notes).capitalize() + ".")
