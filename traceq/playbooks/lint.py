"""`traceq playbooks lint`: schema issues (loader) plus checks that need the real views.

Every query of every playbook is run once, with its default parameters, against an empty
dataset whose public views and rollups are all registered: an unknown table or column, a
type error or a `$param` the playbook does not declare fails here instead of during an
incident. The house rules on top of the schema: a parameter's reason, seed references.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from traceq.dataset import Dataset
from traceq.playbooks.keys import line_of
from traceq.playbooks.loader import LoadReport
from traceq.playbooks.model import Issue, Playbook
from traceq.playbooks.rollups import materialise
from traceq.playbooks.values import bind
from traceq.session import QueryError, Session

MIN_REASON_CHARS = 20


def lint(report: LoadReport) -> list[Issue]:
    """Every issue of the loaded playbooks: the loader's, the house rules', the binding's."""
    issues = list(report.issues)
    for pb in report.playbooks:
        issues += house_rules(pb)
    issues += bind_all(report.playbooks)
    return issues


def house_rules(pb: Playbook) -> list[Issue]:
    out = []
    for p in pb.params.values():
        if len(p.reason.strip()) < MIN_REASON_CHARS:
            where = f"params.{p.name}.reason"
            out.append(Issue(pb.source, where, "say why this default", line_of(pb.lines, where)))
    if not any("seed" in r for r in pb.references):
        where = "references"
        out.append(Issue(pb.source, where, "cite at least one seed section", pb.lines.get(where)))
    return out


def bind_all(playbooks: list[Playbook]) -> list[Issue]:
    """Run every query on an empty dataset; one issue per query that fails."""
    issues: list[Issue] = []
    with tempfile.TemporaryDirectory(prefix="traceq-lint-") as tmp:
        ds = Dataset(Path(tmp) / "empty.tq", create=True)
        with Session(ds) as session:
            materialise(session)
            for pb in playbooks:
                values = {**pb.defaults(), "start": 0, "end": 1, "root_start": 0, "root_end": 1}
                for where, sql in pb.queries():
                    if not sql:
                        continue
                    try:
                        session.query(sql, bind(sql, values))
                    except (QueryError, KeyError) as exc:
                        message = " ".join(str(exc).split())[:300]
                        issues.append(Issue(pb.source, where, message, line_of(pb.lines, where)))
    return issues
