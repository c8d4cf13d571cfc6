"""What if: the engine model `traceq whatif` calibrates from this dataset, replayed at other
arrival rates and settings; TTFT p99 and SLO attainment against the rate, the run's own point
marked, and the figures at the slider's rate."""

import streamlit as st

from traceq.app import data, sidebar, ui, whatif
from traceq.whatif.limits import KNOBS

ctx = ui.context()
targets = sidebar.targets()

st.title("What if")
engine = data.engine_model(ctx.dataset)
if engine.calibrated is None:
    st.info(f"No engine model for this dataset: {engine.note}")
    st.stop()
cal = engine.calibrated
limits, work = cal.limits, cal.model.workload
st.caption(
    f"The engine model of `traceq whatif`, calibrated on the whole run ({work.total_requests:,} "
    f"requests, {cal.model.steps.steps:,} engine steps; the time filter does not apply), "
    f"replays the run's own requests at other rates (docs/WHATIF.md). SLO from the sidebar; "
    f"max rates at {whatif.ATTAINMENT * 100:.0f} % of requests meeting it."
)

knobs = KNOBS["max_num_seqs"], KNOBS["max_num_batched_tokens"]
cols = st.columns(3)
chosen: dict[str, int | bool] = {
    k.name: int(
        col.number_input(
            k.name,
            min_value=k.lo,
            max_value=k.hi,
            value=int(limits.value(k.name)),
            step=max(1, int(limits.value(k.name)) // whatif.INPUT_STEP_SHARE),
            key=f"whatif_{k.name}",
            help=f"{k.doc}; the run's: {int(limits.value(k.name)):,} "
            f"({limits.items[k.name].detail})",
        )
    )
    for col, k in zip(cols, knobs, strict=False)
}
chosen["chunked_prefill"] = cols[2].toggle(
    "Chunked prefill",
    value=bool(limits.value("chunked_prefill")),
    key="whatif_chunked_prefill",
    help=f"{KNOBS['chunked_prefill'].doc}; the run's: {limits.items['chunked_prefill'].detail}",
)
changes = tuple(sorted((k, v) for k, v in chosen.items() if v != limits.value(k)))
curves = data.whatif_curves(ctx.dataset, changes, targets.slo, targets.price)
if curves.warning:
    st.warning(curves.warning)

top = float(curves.frame["rate_rps"].max())
rate = st.slider(
    "Arrival rate (req/s)",
    min_value=0.0,
    max_value=round(top, 2),
    value=round(min(work.rate_rps, top), 2),
    step=max(round(top / whatif.SLIDER_STEPS, 2), 0.01),
    key="whatif_rate",
    help=f"The run's own: {work.rate_rps:,.2f} req/s.",
)
at = data.whatif_at(
    ctx.dataset, changes, targets.slo, targets.price, max(rate, top / whatif.SLIDER_STEPS)
)
names = [whatif.OBSERVED, *([whatif.CHANGED] if whatif.CHANGED in at else [])]
cols = st.columns(5)
for name in names:  # a row of figures per curve: as observed, then with the changes
    row = at[name]
    cols[0].metric(f"Max rate, {name}", f"{curves.max_rates[name]:,.2f} req/s")
    cols[1].metric(f"TTFT p99, {name}", ui.ms(row["ttft_p99_ms"]))
    cols[2].metric(f"TPOT p50, {name}", ui.ms(row["tpot_p50_ms"]))
    cols[3].metric(f"SLO attainment, {name}", ui.pct(row["attainment"]))
    cols[4].metric(f"Goodput, {name}", ui.num(row["goodput_rps"], ",.2f", " req/s"))

left, right = st.columns(2)
left.altair_chart(whatif.curve_chart(curves, "ttft_p99_ms", rate), width="stretch")
right.altair_chart(whatif.curve_chart(curves, "attainment", rate), width="stretch")
st.caption(
    "Lines: the model's replays (seed 0: the run's own arrivals, rescaled). Diamond: the run "
    "itself. Grey rule: the slider's rate. Red dashes: the attainment target. "
    "For the replicas a target rate needs: `traceq whatif DATASET --target-rate RPS`."
)
