"""The catalogue's `explains:` edges as one graph, checked as a whole.

An edge names a playbook that must exist and, with `via`, causes that playbook must have; a
playbook cannot explain itself, and the edges cannot form a cycle (a root would explain its
own root). Each problem is an `Issue` with the file and line of the edge.

>>> from traceq.playbooks.loader import load_catalog
>>> check(load_catalog().playbooks)
[]
"""

from __future__ import annotations

import itertools

from traceq.playbooks.keys import line_of
from traceq.playbooks.model import Issue, Playbook


def check(playbooks: list[Playbook], prefer: set[str] | None = None) -> list[Issue]:
    """Every edge to an unknown playbook or cause, and every cycle, with file:line; a cycle
    is reported at an edge of a file in `prefer` when it runs through one."""
    by_id = {p.id: p for p in playbooks}
    issues: list[Issue] = []
    for pb in playbooks:
        for i, edge in enumerate(pb.explains):
            where = f"explains[{i}].playbook"
            target = by_id.get(edge.playbook)
            if target is None:
                issues.append(_issue(pb, where, f"no playbook {edge.playbook!r} to explain"))
            elif target.id == pb.id:
                issues.append(_issue(pb, where, "a playbook cannot explain itself"))
            else:
                causes = {c.id for c in target.causes}
                for cid in edge.via:
                    if cid not in causes:
                        issues.append(
                            _issue(pb, f"explains[{i}].via", f"{target.id} has no cause {cid!r}")
                        )
    issues += _cycles(playbooks, by_id, prefer or set())
    return issues


def _issue(pb: Playbook, field: str, message: str) -> Issue:
    return Issue(pb.source, field, message, line_of(pb.lines, field))


def _cycles(playbooks: list[Playbook], by_id: dict[str, Playbook], prefer: set[str]) -> list[Issue]:
    """One issue per cycle, reported at the edge that closes it (depth-first order), or at
    the first of its edges in a `prefer` file."""
    issues: list[Issue] = []
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(pid: str) -> None:
        state[pid] = 1
        path.append(pid)
        for i, edge in enumerate(by_id[pid].explains):
            nxt = edge.playbook
            if nxt not in by_id or nxt == pid:
                continue
            if state.get(nxt) == 1:
                ring = [*path[path.index(nxt) :], nxt]
                at, index = pid, i
                for a, b in itertools.pairwise(ring):
                    if by_id[a].source in prefer:
                        at = a
                        index = next(k for k, e in enumerate(by_id[a].explains) if e.playbook == b)
                        break
                where = f"explains[{index}].playbook"
                issues.append(_issue(by_id[at], where, f"cycle: {' → '.join(ring)}"))
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[pid] = 2

    for pb in sorted(playbooks, key=lambda p: p.id):
        if pb.id not in state:
            visit(pb.id)
    return issues


def consequences(playbooks: list[Playbook]) -> dict[str, list[str]]:
    """Playbook id → the ids it can explain, for documentation."""
    return {p.id: [e.playbook for e in p.explains] for p in playbooks if p.explains}
