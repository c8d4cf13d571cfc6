"""Findings: the incidents the playbooks found, worst first — severity, title, when, what,
impact, cause, the change to make and the tail of the metric it hurt most, their consequences
folded under them — each with its root finding's causes, evidence and SQL; links drill into
the window and the requests; each incident exports as Markdown. Then the run's tail (p99
TTFT, TPOT, e2e and what their slowest requests spent their time on, as the report shows it);
the playbooks that lacked their data share one line."""

import streamlit as st

from traceq.app import charts, data, export_md, state, ui
from traceq.app.queries import Window
from traceq.findings import Finding
from traceq.report.incidents import Block, sentence
from traceq.report.render_md import tail_md

ctx = ui.context()
st.title("Findings")
args = state.cli_args()
result = data.load_findings(ctx.dataset, args.findings, args.gpu)
if result.note:
    st.info(result.note, icon=":material/extension_off:")
view = result.view
numbered = list(enumerate(view.blocks, 1))
inside = {n for n, b in numbered if b.overlaps(ctx.window.since, ctx.window.until)}
shown = [(n, b) for n, b in numbered if n in inside]
hidden = [b for n, b in numbered if n not in inside]
st.caption(
    f"{len(shown):,} incident{'' if len(shown) == 1 else 's'} in this window"
    + (f", {len(hidden):,} outside the time filter" if hidden else "")
    + f"; {view.tally}."
)


def details(f: Finding, key: str) -> None:
    """A finding's causes, evidence (charts, table, SQL), fixes, next checks, references."""
    if f.causes:
        st.markdown("**Causes, most likely first**")
        st.dataframe(
            [
                {"cause": c.title, "status": c.status.replace("_", " "), "strength": c.strength,
                 "evidence": c.evidence, "needs": c.needs}
                for c in sorted(f.causes, key=lambda c: -c.strength)
            ],
            hide_index=True,
            width="stretch",
            column_config={
                "strength": st.column_config.ProgressColumn(
                    min_value=0.0, max_value=1.0, format="%.2f"
                )
            },
        )  # fmt: skip
    for e in f.evidence:
        st.markdown(f"**Evidence: {e.title}**" + (" (cut)" if e.truncated else ""))
        drawn = charts.evidence(e.columns, e.rows)
        cols = st.columns(2) if len(drawn) > 1 else [st.container()]
        for j, chart in enumerate(drawn):
            cols[j % len(cols)].altair_chart(chart, width="stretch", key=f"{key}_chart_{j}")
        if e.rows:
            st.dataframe(ui.evidence_frame(e.columns, e.rows), hide_index=True, width="stretch")
        st.code(e.sql.strip(), language="sql")
    for title, items in (("Fixes", f.fixes), ("Next checks", f.next_checks)):
        if items:
            st.markdown(f"**{title}**\n" + "\n".join(f"- {x}" for x in items))
    if f.references:
        st.caption("References: " + "; ".join(f.references))


def card(n: int, b: Block) -> None:
    """One incident: what a person reads first, then the way into its data."""
    i = b.incident
    with st.container(border=True):
        folded = len(b.consequences)
        st.markdown(
            f":{ui.SEVERITY_COLOR.get(i.severity, 'gray')}-badge[{i.severity}] "
            f"Incident {n} · root `{i.root}`"
            + (f" · explains {folded} other finding{'s' if folded > 1 else ''}" if folded else "")
        )
        st.subheader(i.title)
        if b.when:
            st.markdown(sentence(b.when))
        st.markdown("  \n".join(f"**{label.capitalize()}:** {text}" for label, text in b.story))
        if b.consequences:
            st.markdown(
                "**Explained by this incident** (not separate failures)\n"
                + "\n".join(
                    f"- └ `{c.id}` ({c.status}, see `{i.root}`): {c.message}"
                    for c in b.consequences
                )
            )
        if i.end_ns > i.start_ns:
            label = f"Show {state.format_window(Window(i.start_ns, i.end_ns))} on the timeline"
            if st.button(label, key=f"win_{n}", icon=":material/timeline:"):
                ui.go("timeline", since=state.format_ts(i.start_ns),
                      until=state.format_ts(i.end_ns))  # fmt: skip
        if b.examples:
            st.markdown("**Example requests** (open the waterfall)")
            cols = st.columns(min(4, len(b.examples)))
            for j, rid in enumerate(b.examples[:8]):
                if cols[j % len(cols)].button(
                    rid, key=f"req_{n}_{j}", icon=":material/waterfall_chart:"
                ):
                    ui.go("phases", request=rid)
        if b.root is not None:
            with st.expander(f"Causes, evidence and SQL of `{i.root}`", expanded=n == 1):
                details(b.root, f"root_{n}")
        for c in b.consequences:
            with st.expander(f"└ `{c.id}` ({c.status}, see `{i.root}`): {c.title}"):
                st.markdown(c.message)
                details(c, f"see_{n}_{c.id}")
        st.download_button(
            "Export as Markdown",
            export_md.incident(b, dataset=ctx.dataset),
            file_name=f"incident-{n}-{i.root}.md",
            mime="text/markdown",
            key=f"md_{n}",
            icon=":material/download:",
        )


for n, b in shown:
    card(n, b)
if not view.blocks and not result.note:
    st.success("No incident: no playbook failed.")
if view.tail:  # the whole run's, whatever the time filter
    st.markdown("\n".join(tail_md(view.tail, "**The run's tail**")))
if view.warnings:
    st.markdown(
        "**Warnings that no incident holds**\n"
        + "\n".join(f"- `{f.id}` ({f.severity}): {f.message}" for f in view.warnings)
    )
for f in view.errors:
    st.warning(f"`{f.id}` errored, its checks did not run: {f.message}")
for line in (view.assumed_gpu, view.not_run_line):
    if line:
        st.caption(sentence(line) + ".")
if hidden:
    with st.expander(f"Incidents outside the time filter ({len(hidden)})"):
        st.dataframe(
            [
                {"severity": b.incident.severity, "incident": b.incident.title,
                 "playbook": b.incident.root, "when": b.when}
                for b in hidden
            ],
            hide_index=True,
            width="stretch",
        )  # fmt: skip
if view.passed:
    with st.expander(f"Passed ({len(view.passed)})"):
        st.dataframe(
            [{"playbook": f.id, "title": f.title, "message": f.message} for f in view.passed],
            hide_index=True,
            width="stretch",
        )
