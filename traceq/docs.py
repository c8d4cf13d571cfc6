"""The public SQL views: the files that define them (`VIEW_FILES`) and their documentation,
read from the comments in `traceq/sql/*.sql`.

Each public view starts with `-- @view <name>` and a comment block; each column of its final
SELECT has a `-- comment` line above it. `python -m traceq.docs > docs/VIEWS.md` renders
them; tests/test_docs.py checks that every column DuckDB reports is documented.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from traceq.sql import load

VIEW_FILES = ("gap_bucket", "views", "crosswalk", "gpu", "request_gaps", "rollups", "hops")
"""The SQL files of the public views (`traceq/sql/<name>.sql`), in the order they are created:
traceq/db.py runs them on every connection, traceq/spark/catalog.py renders them for Spark."""

_ALIAS = re.compile(r"\bAS\s+(\w+),?\s*$", re.IGNORECASE)
_BARE = re.compile(r"^(?:[a-z_]\w*\.)?([a-z_][a-z0-9_]*),?\s*$")


@dataclass
class ViewDoc:
    name: str
    file: str
    doc: str
    columns: dict[str, str] = field(default_factory=dict)


def _column_name(expression: str) -> str | None:
    last = expression.strip()
    match = _ALIAS.search(last) or _BARE.match(last)
    return match.group(1) if match else None


def _parse_view(name: str, file: str, lines: list[str]) -> ViewDoc:
    header: list[str] = []
    body = iter(lines)
    for line in body:
        if not line.startswith("--"):
            break
        header.append(line.removeprefix("--").strip())
    view = ViewDoc(name, file, " ".join(header))
    text = lines[len(header) :]
    # the view's statement ends at its first line ending in ";" (helper views may follow)
    end = next(
        (i for i, line in enumerate(text) if not line.startswith("--") and line.endswith(";")),
        len(text) - 1,
    )
    text = text[: end + 1]
    select = max(i for i, line in enumerate(text) if line.startswith("SELECT"))
    pending: str | None = None
    expression: list[str] = []
    for line in text[select + 1 :]:
        stripped = line.strip()
        if line.startswith(("FROM", "WINDOW", "GROUP", "ORDER")):
            break
        if stripped.startswith("--"):
            pending = ((pending + " ") if pending and not expression else "") + stripped[2:].strip()
            continue
        if pending is None:
            continue
        expression.append(stripped)
        if stripped.endswith(",") or _is_last(text, line):
            column = _column_name(stripped)
            if column:
                view.columns[column] = pending
            pending, expression = None, []
    return view


def _is_last(text: list[str], line: str) -> bool:
    i = text.index(line)
    return i + 1 < len(text) and text[i + 1].startswith(("FROM", "WINDOW"))


def views() -> list[ViewDoc]:
    """Every public view of every SQL view file, in file order."""
    out = []
    for file in VIEW_FILES:
        blocks = re.split(r"^-- @view (\w+)\n", load(file), flags=re.MULTILINE)
        for name, block in zip(blocks[1::2], blocks[2::2], strict=True):
            out.append(_parse_view(name, f"traceq/sql/{file}.sql", block.splitlines()))
    return out


def render_markdown() -> str:
    out = [
        "# Public SQL views",
        "",
        "Generated from the comments in `traceq/sql/*.sql` by",
        "`python -m traceq.docs > docs/VIEWS.md`; do not edit by hand. Metric definitions:",
        "[METRICS.md](METRICS.md). Tables: [SCHEMA.md](SCHEMA.md).",
        "",
    ]
    for v in views():
        out += [f"## `{v.name}`", "", v.doc, "", f"Defined in `{v.file}`.", ""]
        out += ["| column | meaning |", "|---|---|"]
        out += [f"| `{c}` | {doc} |" for c, doc in v.columns.items()]
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(render_markdown(), end="")
