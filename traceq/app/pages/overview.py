"""Overview: the KPIs of the window, the incidents worst first, the time range and sources."""

import streamlit as st

from traceq.app import charts, data, sidebar, state, ui
from traceq.playbooks.words import counted
from traceq.report.incidents import sentence

ctx = ui.context()
targets = sidebar.targets()
k = data.kpis(ctx.dataset, ctx.window, targets.slo, targets.price)

st.title("Overview")
st.caption(
    f"{k['requests']:,} requests arriving {state.format_window(ctx.window)}. "
    "TTFT counts from arrival, so it includes tokenization and queueing (docs/METRICS.md)."
)

cols = st.columns(4)
for col, (label, metric) in zip(
    cols, [("TTFT", "ttft"), ("TPOT", "tpot"), ("TBT", "tbt"), ("e2e", "e2e")], strict=True
):
    col.metric(f"{label} p50", ui.ms(k[f"{metric}_p50"]), border=True)
    col.metric(f"{label} p99", ui.ms(k[f"{metric}_p99"]), border=True)

cols = st.columns(5)
cols[0].metric(
    "Throughput (req/s)",
    ui.num(k["requests_per_s"]),
    border=True,
    help=f"{ui.num(k['output_tokens_per_s'], ',.0f')} output tokens/s",
)
cols[1].metric(
    "Goodput (req/s)",
    ui.num(k["goodput_per_s"]),
    border=True,
    help="Completed requests per second meeting every SLO in the sidebar.",
)
cols[2].metric(
    "SLO attainment",
    ui.pct(k["slo_attainment"]),
    border=True,
    help=f"TTFT ≤ {targets.ttft_ms:g} ms, TPOT ≤ {targets.tpot_ms:g} ms, "
    f"e2e ≤ {targets.e2e_ms:g} ms (set in the sidebar)",
)
cols[3].metric(
    "Error rate",
    ui.pct(k["error_rate"]),
    border=True,
    help=f"{k['errors']:,} of {k['requests']:,} requests failed.",
)
cols[4].metric(
    "Cost $/1M tokens",
    ui.num(k["cost_per_m_output_tokens"]),
    border=True,
    help=f"Per million output tokens: {counted(k['gpus'], 'GPU')} × the window × "
    f"$ {targets.price:g} per GPU-hour (sidebar) / output tokens.",
)

left, right = st.columns([3, 2])
with left:
    st.subheader("TTFT over time")
    frame = data.series(ctx.dataset, ctx.window, "arrivals")
    if frame.is_empty():
        ui.empty_note("requests")
    else:
        chart = charts.series(
            frame.drop_nulls("ttft_p99_ms"),
            ["ttft_p50_ms", "ttft_p99_ms"],
            title="",
            unit="ms",
            window=ctx.window,
            labels={"ttft_p50_ms": "p50", "ttft_p99_ms": "p99"},
        )
        ui.brushable(chart, "overview_latency", ctx.window)
with right:
    st.subheader("Incidents")
    args = state.cli_args()
    findings = data.load_findings(ctx.dataset, args.findings, args.gpu)
    if findings.note:
        st.info(findings.note)
    view = findings.view
    if not view.blocks and not findings.note:
        st.success(f"No incident ({view.tally}).")
    for b in view.blocks[:6]:
        i = b.incident
        st.markdown(
            f"**:{ui.SEVERITY_COLOR.get(i.severity, 'gray')}-badge[{i.severity}]** "
            f"**{i.title}**  \n{sentence(b.when)}"
            + (f"  \nExplains {', '.join(f'`{c.id}`' for c in b.consequences)}"
               if b.consequences else "")
        )  # fmt: skip
    for line in (view.assumed_gpu, view.not_run_line):
        if line:
            st.caption(sentence(line) + ".")
    if view.blocks:
        st.page_link(
            ui.PAGES / "findings.py",
            label=f"Open the incidents ({len(view.blocks)})",
            icon=":material/arrow_forward:",
        )

st.subheader("Time range and sources")
tr = ctx.time_range
if tr.full is not None:
    st.caption(f"Data from {state.format_window(tr.full)}.")
sources = data.sources(ctx.dataset).select(
    "path", "format", "status", "rows", "quarantined", "start_at", "end_at", "clock_domain"
)
st.dataframe(sources, hide_index=True, width="stretch")
quarantined = int(sources["quarantined"].sum())
if quarantined:
    st.caption(
        f"{counted(quarantined, 'record')} quarantined: `SELECT * FROM quarantine` in the console."
    )
