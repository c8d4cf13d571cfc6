"""The playbook engine: YAML playbooks (traceq/playbooks/catalog/, linked from the top-level
playbooks/) run over a dataset into `traceq.findings.Finding`s.

>>> from traceq.playbooks import diagnose, load_catalog                  # doctest: +SKIP
>>> with Session("run.tq") as s:                                         # doctest: +SKIP
...     diagnosis = diagnose(s, load_catalog().playbooks)
"""

from __future__ import annotations

from traceq.playbooks.engine import Options, diagnose, run_playbook
from traceq.playbooks.loader import LoadReport, builtin_dir, load_catalog, load_dir
from traceq.playbooks.model import Issue, Playbook

__all__ = [
    "Issue",
    "LoadReport",
    "Options",
    "Playbook",
    "builtin_dir",
    "diagnose",
    "load_catalog",
    "load_dir",
    "run_playbook",
]
