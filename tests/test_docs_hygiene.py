"""Docs and code comments cite files, commands and measured figures, never traceq's own issue
numbers, the team's spec or its research notes (a user has none of them), and
docs/PERFORMANCE.md stays one page.

Scanned: every text file under docs/ and playbooks/, README.md, traceq/ (.py, .sql, .yaml) and
bench/ (.py, .md). A hit is `issue N`, `issue #N`, `issues N and M`, `Issue N §x`, or an anchor
made from such a heading (`…-issue-14`), in any case.

Allowed, narrowly: another project's tracker, written as `<Project> issue N` where `<Project>`
is one of `UPSTREAM` below, spelled as there, right before the word (e.g. "LMCache issue
1094", "vllm issue #1879"); add a project there when a doc has to cite its tracker. A URL
(`https://github.com/vllm-project/vllm/issues/1879`) never matches: its number follows a `/`.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PERFORMANCE = ROOT / "docs" / "PERFORMANCE.md"
PERFORMANCE_MAX_LINES = 320

UPSTREAM = frozenset(
    {
        "vLLM",
        "vllm",
        "SGLang",
        "sglang",
        "LMCache",
        "DuckDB",
        "duckdb",
        "polars",
        "Spark",
        "pyspark",
        "OpenTelemetry",
        "opentelemetry-collector",
        "semantic-conventions",
        "AIPerf",
        "aiperf",
        "Streamlit",
        "s3fs",
        "fsspec",
        "dcgm-exporter",
    }
)

ISSUE = re.compile(r"\bissues?[ \t_-]*#?[0-9]+(?:[ \t]+and[ \t]+#?[0-9]+)?", re.IGNORECASE)
PROJECT_BEFORE = re.compile(r"([\w.-]+)[ \t]+$")
TEXT_SUFFIXES = {".md", ".py", ".sql", ".yaml", ".yml", ".toml", ".sh", ".txt", ".html"}


def _scanned() -> list[Path]:
    files = [ROOT / "README.md"]
    for folder in ("docs", "playbooks"):
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in TEXT_SUFFIXES]
    files += [p for p in (ROOT / "traceq").rglob("*") if p.suffix in {".py", ".sql", ".yaml"}]
    files += [p for p in (ROOT / "bench").rglob("*") if p.suffix in {".py", ".md"}]
    return sorted(p for p in files if p.is_file() and "__pycache__" not in p.parts)


def issue_citations(text: str) -> list[str]:
    """Every traceq issue citation in `text`: the matched words, upstream trackers left out.

    >>> issue_citations("Measured for issue 12 (see issues 3 and 4); LMCache issue 1094 too.")
    ['issue 12', 'issues 3 and 4']
    >>> issue_citations("Issue 10 §1: a probe. [x](PERFORMANCE.md#scale-benchscalepy-issue-14)")
    ['Issue 10', 'issue-14']
    >>> issue_citations("https://github.com/vllm-project/vllm/issues/1879; report.issues[:5]")
    []
    """
    hits = []
    for m in ISSUE.finditer(text):
        before = PROJECT_BEFORE.search(text, 0, m.start())
        if before and before.end() == m.start() and before.group(1) in UPSTREAM:
            continue
        hits.append(m.group(0))
    return hits


def test_no_traceq_issue_numbers_in_docs_or_code_comments():
    found = []
    for path in _scanned():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found += [f"{path.relative_to(ROOT)}:{n}: {hit}" for hit in issue_citations(line)]
    assert not found, "cite a file, command or figure instead:\n" + "\n".join(found)


SPEC = re.compile(r"\bSPEC(?:\.md\b|[ \t]*§)")


def test_no_citations_of_the_team_spec():
    """The product spec is the team's, not the user's: docs and comments cite the page that
    says it (docs/METRICS.md for definitions, docs/INGEST.md for conventions)."""
    found = []
    for path in _scanned():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found += [f"{path.relative_to(ROOT)}:{n}: {line.strip()}" for _ in SPEC.finditer(line)]
    assert not found, "cite a file in this repository instead:\n" + "\n".join(found)


RESEARCH = re.compile(r"\bresearch/[\w.-]+\.md")


def test_no_citations_of_the_team_research_notes():
    """The team's research notes are not in the repository: docs and comments cite the
    producer's own source (`vllm/v1/metrics/loggers.py`) or a file here (tests/data/real)."""
    found = []
    for path in [*_scanned(), *sorted((ROOT / "tests").rglob("*.py"))]:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            hits = RESEARCH.findall(line)
            found += [f"{path.relative_to(ROOT)}:{n}: {hit}" for hit in hits]
    assert not found, "cite the producer's source or a file here instead:\n" + "\n".join(found)


def test_the_upstream_form_and_urls_are_allowed():
    assert issue_citations("LMCache issue 1094 and vllm issue #1879") == []
    assert issue_citations("see https://github.com/sgl-project/sglang/issues/42") == []
    assert issue_citations("the issue 9 target; traceq issue 4") == ["issue 9", "issue 4"]


def test_performance_page_stays_one_page():
    lines = PERFORMANCE.read_text(encoding="utf-8").count("\n")
    assert lines <= PERFORMANCE_MAX_LINES, f"docs/PERFORMANCE.md has {lines} lines"


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    text = heading.lstrip("#").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_links_into_the_performance_page_resolve():
    page = PERFORMANCE.read_text(encoding="utf-8")
    anchors = {_anchor(line) for line in page.splitlines() if line.startswith("#")}
    bad = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        links = re.findall(r"PERFORMANCE\.md#([\w-]+)", text)
        if path == PERFORMANCE:
            links += re.findall(r"\]\(#([\w-]+)\)", text)
        bad += [f"{path.relative_to(ROOT)}: #{a}" for a in links if a not in anchors]
    assert not bad, "no such heading in docs/PERFORMANCE.md:\n" + "\n".join(bad)
