"""Timeline: request rate, latency, engine, GPU and events on one time axis. Brushing a
window on any chart sets the time filter every page honours."""

import streamlit as st

from traceq.app import charts, data, state, ui

ctx = ui.context()
w = ctx.window

st.title("Timeline")
st.caption(
    f"{state.format_window(w)}. Drag across any chart to filter every page to that window; "
    "the sidebar clears it."
)

requests = data.series(ctx.dataset, w, "requests")
engine = data.series(ctx.dataset, w, "engine")
gpu = data.series(ctx.dataset, w, "gpu")
markers = data.series(ctx.dataset, w, "markers")

PANELS = [
    ("rate", requests, lambda f: charts.rate(f, window=w)),
    (
        "ttft",
        requests.drop_nulls("ttft_p99_ms"),
        lambda f: charts.series(
            f,
            ["ttft_p50_ms", "ttft_p99_ms"],
            title="TTFT by arrival window",
            unit="ms",
            window=w,
            labels={"ttft_p50_ms": "p50", "ttft_p99_ms": "p99"},
        ),
    ),
    (
        "tbt",
        requests.drop_nulls("tbt_p99_ms"),
        lambda f: charts.series(
            f,
            ["tbt_p50_ms", "tbt_p99_ms"],
            title="TBT (gap between chunks)",
            unit="ms",
            window=w,
            labels={"tbt_p50_ms": "p50", "tbt_p99_ms": "p99"},
        ),
    ),
    (
        "queue",
        engine.drop_nulls(["running", "waiting"]),
        lambda f: charts.series(
            f,
            ["running", "waiting"],
            title="Engine: requests running and waiting",
            unit="requests",
            window=w,
        ),
    ),
    (
        "kv",
        engine.drop_nulls("kv_usage"),
        lambda f: charts.series(
            f,
            ["kv_usage"],
            title="Engine: KV-cache usage (peak)",
            unit="ratio",
            window=w,
            labels={"kv_usage": "KV usage"},
        ),
    ),
    (
        "preempt",
        engine.filter(engine["preemptions"] > 0),
        lambda f: charts.series(
            f, ["preemptions"], title="Engine: preemptions", unit="per window", window=w
        ),
    ),
    (
        "activity",
        gpu,
        lambda f: charts.series(
            f,
            ["sm_active", "dram_active"],
            title="GPU: SM and DRAM activity",
            unit="ratio",
            window=w,
        ),
    ),
    (
        "power",
        gpu.drop_nulls("power_w"),
        lambda f: charts.series(
            f, ["power_w"], title="GPU: power", unit="W", window=w, labels={"power_w": "power"}
        ),
    ),
    (
        "clock",
        gpu.drop_nulls("sm_clock_mhz"),
        lambda f: charts.series(
            f,
            ["sm_clock_mhz"],
            title="GPU: SM clock",
            unit="MHz",
            window=w,
            labels={"sm_clock_mhz": "SM clock"},
        ),
    ),
    ("events", markers, lambda f: charts.markers(f, window=w)),
]

missing = []
for key, frame, build in PANELS:
    if frame.is_empty():
        missing.append(key)
        continue
    ui.brushable(build(frame), f"timeline_{key}", w)
if missing:
    st.caption(f"Nothing to draw in this window for: {', '.join(missing)}.")
