"""Open a dataset: a bundled sample scenario, a dataset folder by path, or raw files
uploaded and ingested into a new dataset (with a progress bar)."""

import uuid
from pathlib import Path

import streamlit as st

from traceq.app import opening, state, ui
from traceq.dataset import DatasetError
from traceq.ingest import IngestOptions, InputError
from traceq.remote import is_url, open_dataset

st.title("traceq: postmortem")
st.markdown(
    "Open a dataset written by `traceq ingest`, try a bundled scenario, or upload the raw "
    "files an incident left behind (OTLP traces, vLLM / SGLang logs, nvidia-smi / DCGM "
    "samples, load-test exports)."
)


def opened(path: Path | str) -> None:
    state.open_dataset(str(path))
    ui.go("overview")


def progress_bar():
    bar = st.progress(0.0, text="starting")
    return lambda share, text: bar.progress(share, text=text)


st.subheader("A bundled scenario")
scenarios = opening.scenarios()
if not scenarios:
    st.caption(f"No sample_traces/ folder at {opening.SAMPLE_TRACES} (a source checkout has one).")
else:
    name = st.selectbox(
        "Scenario",
        list(scenarios),
        key="home_scenario",
        format_func=lambda n: f"{n}: {scenarios[n]}",
    )
    if st.button("Open scenario", type="primary", key="home_open_sample"):
        try:
            opened(opening.open_sample(name, progress_bar()))
        except (InputError, DatasetError) as exc:
            st.error(str(exc).splitlines()[0])

st.subheader("A dataset on this machine")
path = st.text_input(
    "Dataset folder, or its URL in object storage (s3://…)",
    placeholder="/data/incident.tq",
    key="home_path",
)
if st.button("Open", key="home_open_path") and path.strip():
    try:
        open_dataset(path.strip()).manifest()
    except (DatasetError, OSError) as exc:
        st.error(str(exc).splitlines()[0])
    else:
        opened(path.strip() if is_url(path.strip()) else Path(path.strip()).resolve())

st.subheader("Upload raw files")
uploads = st.file_uploader(
    "Traces, logs, GPU samples, load-test exports", accept_multiple_files=True, key="home_uploads"
)
cols = st.columns(2)
year = cols[0].number_input(
    "Year of log stamps that print none (0: the file's)",
    min_value=0,
    max_value=2100,
    value=0,
    key="home_year",
)
tz = cols[1].text_input("Time zone of local stamps", value="UTC", key="home_tz")
if uploads and st.button("Ingest into a new dataset", type="primary", key="home_ingest"):
    run = opening.workdir() / "uploads" / uuid.uuid4().hex[:12]
    files = opening.save_uploads(((u.name, u.getvalue()) for u in uploads), run / "files")
    options = IngestOptions(year=int(year) or None, tz=tz.strip() or "UTC")
    try:
        results = opening.ingest_folder(files[0].parent, run / "dataset.tq", options,
                                        progress_bar())  # fmt: skip
    except (InputError, DatasetError) as exc:
        st.error(str(exc).splitlines()[0])
    else:
        if any(r.rows for r in results):
            opened(run / "dataset.tq")
        else:
            st.error("None of the files held rows traceq reads.")
