"""Find and load playbook files: YAML's safe loader, the keys the schema knows (`keys.py`, with
lines), the schema check of `model.py`, then the `explains:` graph of the whole catalogue
(`graph.py`: unknown playbooks, cycles).

The built-in catalogue ships inside the package (`traceq/playbooks/catalog/`, which the
top-level `playbooks/` of a source checkout links to), so a pip-installed traceq finds it.
Every problem of every file is collected before anything is reported.

>>> report = load_catalog()
>>> report.issues, len(report.playbooks) >= 13
([], True)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from traceq.playbooks import graph
from traceq.playbooks.keys import field_lines, line_of, unknown_keys
from traceq.playbooks.model import Issue, Playbook

# libyaml's parser when PyYAML has it (~20x faster: the catalogue in 0.02 s, not 0.4, at every
# diagnose), with the same safe constructor; the pure-Python one otherwise.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class LoadReport:
    playbooks: list[Playbook] = field(default_factory=list)
    issues: list[Issue] = field(default_factory=list)

    def by_id(self) -> dict[str, Playbook]:
        return {p.id: p for p in self.playbooks}


def builtin_dir() -> Path:
    """The directory of the built-in playbooks (inside the installed package)."""
    return Path(str(resources.files("traceq.playbooks").joinpath("catalog")))


def load_dir(
    directory: str | os.PathLike[str], *, beside: list[Playbook] | None = None
) -> LoadReport:
    """Every `*.yaml` / `*.yml` under `directory`, validated; issues for every bad file.
    Its `explains:` edges are checked against its own playbooks and those `beside` it (the
    built-in ones, for a directory of extra playbooks) that it does not replace."""
    root = Path(directory)
    report = LoadReport()
    if not root.is_dir():
        report.issues.append(Issue(str(root), "(directory)", "not a directory"))
        return report
    files = sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    if not files:
        report.issues.append(Issue(str(root), "(directory)", "no *.yaml playbook files"))
    for path in files:
        load_file(path, report)
    seen: dict[str, str] = {}
    for pb in report.playbooks:
        if pb.id in seen:
            report.issues.append(
                Issue(pb.source, "id", f"{pb.id!r} is also defined in {seen[pb.id]}")
            )
        seen.setdefault(pb.id, pb.source)
    ids = {p.id for p in report.playbooks}
    context = [p for p in beside or [] if p.id not in ids]
    sources = {p.source for p in report.playbooks}
    issues = graph.check(report.playbooks + context, prefer=sources)
    report.issues += [i for i in issues if i.file in sources]
    return report


def load_file(path: Path, report: LoadReport) -> None:
    """Parse one file safely and add its playbook or its issues to `report`."""
    try:
        text = path.read_text(encoding="utf-8")
        node = yaml.compose(text, Loader=LOADER)
        data = yaml.load(text, Loader=LOADER)
    except (yaml.YAMLError, UnicodeDecodeError, OSError) as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        where = f"line {line + 1}" if line is not None else "(file)"
        message = " ".join(str(exc).split())
        report.issues.append(Issue(str(path), where, f"not valid YAML: {message}"))
        return
    lines = field_lines(node)
    pb, issues = Playbook.from_dict(data, source=str(path))
    unknown = unknown_keys(node, str(path))
    report.issues += unknown + [
        Issue(i.file, i.field, i.message, i.line or line_of(lines, i.field)) for i in issues
    ]
    if pb is not None and not unknown:
        pb.lines.update(lines)
        report.playbooks.append(pb)


def load_catalog(extra: str | os.PathLike[str] | None = None) -> LoadReport:
    """The built-in playbooks, plus (or overridden by id) those of `extra`."""
    report = load_dir(builtin_dir())
    if extra is None:
        return report
    more = load_dir(extra, beside=report.playbooks)
    ids = {p.id for p in more.playbooks}
    report.playbooks = [p for p in report.playbooks if p.id not in ids] + more.playbooks
    report.issues += more.issues
    return report
