"""Findings: what the playbooks found, worst first, with causes, evidence, fixes and next
checks; links drill into the window and the requests; each exports as Markdown."""

import streamlit as st

from traceq.app import charts, data, export_md, state, ui
from traceq.app.queries import Window

ctx = ui.context()
st.title("Findings")
result = data.load_findings(ctx.dataset, state.cli_args().findings)
if result.note:
    st.info(result.note, icon=":material/extension_off:")


def overlaps(windows: list[dict], w: Window) -> bool:
    return not windows or any(x["start"] < w.until and x["end"] > w.since for x in windows)


ranked = result.ranked
failed = [f for f in ranked if f.failed and overlaps(f.windows, ctx.window)]
hidden = [f for f in ranked if f.failed and not overlaps(f.windows, ctx.window)]
quiet = [f for f in ranked if not f.failed]
st.caption(
    f"{len(failed)} finding(s) in this window"
    + (f", {len(hidden)} outside the time filter" if hidden else "")
    + f"; {len(quiet)} playbook(s) passed or did not apply."
)

for i, f in enumerate(failed):
    with st.container(border=True):
        st.markdown(
            f":{ui.SEVERITY_COLOR.get(f.severity, 'gray')}-badge[{f.severity}] "
            f":{ui.STATUS_COLOR.get(f.status, 'gray')}-badge[{f.status}] `{f.id}`"
        )
        st.subheader(f.title)
        st.markdown(f.message)
        for j, win in enumerate(f.windows):
            label = f"Show {state.format_window(Window(win['start'], win['end']))} on the timeline"
            if st.button(label, key=f"win_{i}_{j}", icon=":material/timeline:"):
                ui.go(
                    "timeline",
                    since=state.format_ts(win["start"]),
                    until=state.format_ts(win["end"]),
                )
        if f.causes:
            st.markdown("**Causes, most likely first**")
            causes = sorted(f.causes, key=lambda c: -c.strength)
            st.dataframe(
                [
                    {
                        "cause": c.title,
                        "status": c.status,
                        "strength": c.strength,
                        "evidence": c.evidence,
                        "needs": c.needs,
                    }
                    for c in causes
                ],
                hide_index=True,
                width="stretch",
                column_config={
                    "strength": st.column_config.ProgressColumn(
                        min_value=0.0, max_value=1.0, format="%.2f"
                    )
                },
            )
        for e in f.evidence:
            st.markdown(f"**Evidence: {e.title}**" + (" (cut)" if e.truncated else ""))
            drawn = charts.evidence(e.columns, e.rows)
            cols = st.columns(2) if len(drawn) > 1 else [st.container()]
            for j, chart in enumerate(drawn):
                cols[j % len(cols)].altair_chart(chart, width="stretch")
            if e.rows:
                st.dataframe(ui.evidence_frame(e.columns, e.rows), hide_index=True, width="stretch")
            st.code(e.sql.strip(), language="sql")
        if f.example_requests:
            st.markdown("**Example requests** (open the waterfall)")
            cols = st.columns(min(4, len(f.example_requests)))
            for j, rid in enumerate(f.example_requests[:8]):
                if cols[j % len(cols)].button(
                    rid, key=f"req_{i}_{j}", icon=":material/waterfall_chart:"
                ):
                    ui.go("phases", request=rid)
        for title, items in (("Fixes", f.fixes), ("Next checks", f.next_checks)):
            if items:
                st.markdown(f"**{title}**\n" + "\n".join(f"- {x}" for x in items))
        if f.references:
            st.caption("References: " + "; ".join(f.references))
        st.download_button(
            "Export as Markdown",
            export_md.finding(f, dataset=ctx.dataset),
            file_name=f"{f.id}.md",
            mime="text/markdown",
            key=f"md_{i}",
            icon=":material/download:",
        )

if quiet or hidden:
    with st.expander(f"Passed, not applicable or outside the window ({len(quiet) + len(hidden)})"):
        st.dataframe(
            [
                {"playbook": f.id, "status": f.status, "severity": f.severity, "message": f.message}
                for f in hidden + quiet
            ],
            hide_index=True,
            width="stretch",
        )
