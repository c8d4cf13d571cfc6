"""The sidebar every page shares: the open dataset, the time window (with a button to clear
it), the SLOs and GPU price the overview measures against, and the window's Perfetto trace."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from traceq import perfetto
from traceq.app import data, state

SLO_TTFT_MS = 2_000.0
"""Default TTFT SLO (ms): a chat user notices a first token later than about two seconds."""
SLO_TPOT_MS = 100.0
"""Default TPOT SLO (ms): 10 tokens/s, about reading speed."""
SLO_E2E_MS = 30_000.0
"""Default e2e SLO (ms): a typical client request timeout."""
PRICE_PER_GPU_HOUR = 2.50
"""Default price of one GPU-hour (USD): an on-demand H100 at a smaller cloud, 2025."""
EXPORT_MAX_REQUESTS = 5_000
"""Most requests the app exports in one trace file (beyond that, the CLI writes it)."""


@dataclass(frozen=True)
class Targets:
    """The sidebar's SLOs (ms) and price (per GPU-hour)."""

    ttft_ms: float
    tpot_ms: float
    e2e_ms: float
    price: float

    @property
    def slo(self) -> tuple[float, float, float]:
        return (self.ttft_ms, self.tpot_ms, self.e2e_ms)


def targets() -> Targets:
    """The values the sidebar's inputs hold (defaults before the sidebar has run)."""
    get = st.session_state.get
    return Targets(
        get("slo_ttft_ms", SLO_TTFT_MS),
        get("slo_tpot_ms", SLO_TPOT_MS),
        get("slo_e2e_ms", SLO_E2E_MS),
        get("price_per_gpu_hour", PRICE_PER_GPU_HOUR),
    )


def render(dataset: str) -> None:
    tr = data.time_range(dataset)
    window = state.window(tr)
    with st.sidebar:
        st.caption(f"Dataset **{Path(dataset).name}**  \n`{dataset}`")
        if window is None:
            st.caption("No timed data in this dataset.")
        elif state.brushed():
            st.markdown(f"**Time filter**  \n{state.format_window(window)}")
            st.button("Clear time filter", on_click=state.clear_window, icon=":material/close:")
        else:
            st.markdown(f"**Whole run**  \n{state.format_window(window)}")
            st.caption("Brush a window on the Timeline to filter every page.")
            if tr.full is not None and tr.full != window:
                st.button(
                    "Whole data range (start-up included)",
                    on_click=state.set_window,
                    args=(tr.full,),
                    icon=":material/zoom_out_map:",
                )
        with st.expander("SLOs and price", expanded=False):
            st.number_input(
                "TTFT SLO (ms)", min_value=1.0, value=SLO_TTFT_MS, step=100.0, key="slo_ttft_ms"
            )
            st.number_input(
                "TPOT SLO (ms)", min_value=1.0, value=SLO_TPOT_MS, step=5.0, key="slo_tpot_ms"
            )
            st.number_input(
                "e2e SLO (ms)", min_value=1.0, value=SLO_E2E_MS, step=1000.0, key="slo_e2e_ms"
            )
            st.number_input(
                "Price per GPU-hour (USD)",
                min_value=0.0,
                value=PRICE_PER_GPU_HOUR,
                step=0.1,
                key="price_per_gpu_hour",
            )
        if window is not None:
            _export(dataset, window)


def _export(dataset: str, window: state.Window) -> None:
    requests = data.export_size(dataset, window)
    if requests > EXPORT_MAX_REQUESTS:
        st.caption(
            f"{requests:,} requests in this window: narrow it to export from here, or run  \n"
            f"`traceq export {dataset} --format perfetto -o trace.json "
            f"--since {state.format_ts(window.since)} --until {state.format_ts(window.until)}`"
        )
        return
    if st.button("Prepare Perfetto trace", icon=":material/download:"):
        buffer = io.BytesIO()
        summary = perfetto.write(data.session(dataset), buffer, window)
        st.session_state["tq_trace"] = (buffer.getvalue(), summary.events, window)
    prepared = st.session_state.get("tq_trace")
    if prepared and prepared[2] == window:
        st.download_button(
            f"Download trace.json ({prepared[1]:,} events)",
            prepared[0],
            file_name="trace.json",
            mime="application/json",
            help="Open it at ui.perfetto.dev (Open trace file).",
        )
