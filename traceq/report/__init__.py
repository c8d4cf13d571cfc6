"""`traceq report`: the nightly health report and regression gate (seed part 2 §5.1 and
§6.2; docs/REPORT.md).

    from traceq.report import build_report
    report = build_report("run.tq", baseline="baselines/main.json")
    report.regressed        # KPIs that regressed against the baseline

Modules: kpis (what each KPI is), measure (the SQL), compare (bootstrap and verdicts),
thresholds (defaults with reasons, user file), baseline (the file), findings (the door to the
playbook engine), charts (Altair → SVG), render_html / render_md (output), trend (history).
"""

from traceq.report.model import Report, ReportOptions, build_report

__all__ = ["Report", "ReportOptions", "build_report"]
