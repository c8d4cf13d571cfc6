"""No import circle among the modules of traceq/, the playbook engine's included.

Every module is parsed with `ast` (nothing is imported) and each import statement in it is an
edge to the traceq module it names: `from traceq.x import y` names `traceq.x.y` when that is a
module, else `traceq.x`; relative imports are resolved against the importing module's package.

Every import counts, wherever it stands:
- inside a function: a late import that dodges a circle at import time is still a circle (the
  two modules need each other's names), so moving an import into a function cannot pass this;
- under `if TYPE_CHECKING:`: never run, but the modules still need each other's names (mypy
  reads them), and such a circle is as much a name living in the wrong module as one at run
  time.

Importing `traceq.a.b` also runs `traceq/a/__init__.py`; that parent package is not an edge
here, else every package that re-exports its submodules would be a circle with each of them.

A circle fails the test, which prints it as `a (line N) → b (line M) → a`, each line the
import that leads on.
"""

from __future__ import annotations

import ast
import itertools
import textwrap
from collections import deque
from pathlib import Path

import traceq

ROOT = Path(traceq.__file__).resolve().parent

Graph = dict[str, dict[str, int]]
"""module → {module it imports: line of the first such import}."""


def module_name(path: Path, root: Path) -> str:
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> Graph:
    """The import graph of the package at `root` (its folder name is the package name)."""
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: Graph = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    anchor = ".".join(parts[: len(parts) - node.level + 1])
                    base = f"{anchor}.{base}" if base else anchor
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base
                    for alias in node.names
                ]
            else:
                continue
            for target in targets:
                if target in files and target != name:
                    edges[target] = min(edges.get(target, node.lineno), node.lineno)
        graph[name] = edges
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The shortest circle through each module, each circle once."""
    found: dict[frozenset[str], list[str]] = {}
    for start in sorted(graph):
        came_from: dict[str, str] = {}
        queue = deque([start])
        while queue:
            here = queue.popleft()
            if start in graph[here]:
                path = [here]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                circle = [*reversed(path), start]
                found.setdefault(frozenset(circle), circle)
                break
            for there in sorted(graph[here]):
                if there not in came_from and there != start:
                    came_from[there] = here
                    queue.append(there)
    return list(found.values())


def describe(graph: Graph, circle: list[str]) -> str:
    steps = [f"{a} (line {graph[a][b]})" for a, b in itertools.pairwise(circle)]
    return " → ".join([*steps, circle[-1]])


def test_no_import_circle() -> None:
    graph = import_graph(ROOT)
    found = [describe(graph, c) for c in cycles(graph)]
    assert not found, "import circles in traceq/:\n" + "\n".join(found)


def test_graph_sees_every_kind_of_import() -> None:
    """The parse finds each kind of import the test relies on: at the top, in a function,
    under TYPE_CHECKING, and `from package import module`."""
    graph = import_graph(ROOT)
    assert "traceq.dataset" in graph["traceq.writer"]  # top level
    assert "traceq.session" in graph["traceq.cli"]  # inside a function (the SIGTERM handler)
    assert "traceq.ingest.options" in graph["traceq.ingest.otel"]  # under TYPE_CHECKING
    assert "traceq.layout" in graph["traceq.dataset"]  # `from traceq import layout`


def test_a_late_import_circle_fails(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n\nX = 1\n")
    (pkg / "sub" / "b.py").write_text(
        textwrap.dedent(
            """\
            def f():
                from ..a import X  # a late, relative import is still a circle

                return X
            """
        )
    )
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from pkg import d\n"
    )
    (pkg / "d.py").write_text("import pkg.c\n")
    graph = import_graph(pkg)
    assert sorted(describe(graph, c) for c in cycles(graph)) == [
        "pkg.a (line 1) → pkg.sub.b (line 2) → pkg.a",
        "pkg.c (line 4) → pkg.d (line 1) → pkg.c",
    ]
