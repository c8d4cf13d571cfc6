"""The Streamlit postmortem app (`traceq app`): an `st.navigation` router (app.py at the repo
top, `traceq/app/streamlit_app.py` inside the package), thin pages under `pages/`, queries in
`queries.py` (plain functions over a `Session`, SQL in traceq/sql/app_*.sql), Altair chart
builders in `charts.py`, and the cached, bounded loaders in `data.py`."""
