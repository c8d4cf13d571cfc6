"""traceq's Streamlit app: `streamlit run app.py -- [DATASET] [--findings FILE]`, or
`traceq app [DATASET]`. This file only routes (`st.navigation`, in traceq/app/router.py);
the pages live in traceq/app/pages/."""

from traceq.app.router import run

run()
