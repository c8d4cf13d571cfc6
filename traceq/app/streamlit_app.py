"""Streamlit entry point inside the package (`traceq app` runs this file): the router only."""

from traceq.app.router import run

run()
