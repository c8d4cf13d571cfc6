"""The keys a playbook file may hold, and where each field stands in its file.

`unknown_keys` reports every key the schema does not know (a typo such as `evidense:` would
otherwise be dropped in silence), with its line and the nearest known key; `field_lines`
maps each field path (`causes[2].evidence`, `params.kv_full.reason`) to its line, so every
issue of a file can say where it is.

>>> import yaml
>>> node = yaml.compose("id: x\\ncauses:\\n  - id: a\\n    evidense: b\\n")
>>> [(i.line, i.field, i.message) for i in unknown_keys(node, "x.yaml")]
[(4, 'causes[0].evidense', "unknown key 'evidense' (did you mean 'evidence'?)")]
>>> field_lines(node)["causes[0].id"]
3
"""

from __future__ import annotations

import difflib
from typing import Any

import yaml

from traceq.playbooks.model import Issue

_REQUIREMENT = {"sql": None, "needs": None, "min_rows": None}
_QUERY = {"id": None, "title": None, "sql": None}
_PARAM = {k: None for k in ("default", "unit", "doc", "reason", "min", "max", "gpu")}
_CAUSE = {
    "id": None,
    "title": None,
    "sql": None,
    "evidence": None,
    "confirm_at": None,
    "requires": [_REQUIREMENT],
    "fixes": None,
}
_EDGE = {"playbook": None, "mechanism": None, "via": None, "sql": None, "confirm_at": None}
SCHEMA: dict[str, Any] = {
    "schema_version": None,
    "id": None,
    "title": None,
    "severity": None,
    "tags": None,
    "doc": {"what": None, "why": None, "example": None},
    "requires": [_REQUIREMENT],
    "params": {"*": _PARAM},
    "symptom": {"sql": None, "figures": None, "message": None},
    "causes": [_CAUSE],
    "evidence": [_QUERY],
    "examples": {"sql": None},
    "explains": [_EDGE],
    "prediction": {"set": {"*": None}, "says": None, "when": None},
    "fixes": None,
    "next_checks": None,
    "false_positives": None,
    "references": None,
}
"""Nested dicts are mappings of known keys (`*`: any key, each shaped like the value), a
one-element list is a list of such items, None is a leaf the model checks itself."""


def unknown_keys(node: yaml.Node | None, source: str) -> list[Issue]:
    """One issue per key that `SCHEMA` does not know, with its line."""
    issues: list[Issue] = []
    _walk(node, SCHEMA, "", source, issues)
    return issues


def _walk(node: Any, schema: Any, path: str, source: str, issues: list[Issue]) -> None:
    if isinstance(schema, list) and isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, schema[0], f"{path}[{i}]", source, issues)
    elif isinstance(schema, dict) and isinstance(node, yaml.MappingNode):
        for key_node, value in node.value:
            key = str(key_node.value)
            here = f"{path}.{key}" if path else key
            if key in schema:
                _walk(value, schema[key], here, source, issues)
            elif "*" in schema:
                _walk(value, schema["*"], here, source, issues)
            else:
                near = difflib.get_close_matches(key, list(schema), n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                known = "" if near else f"; known: {', '.join(schema)}"
                message = f"unknown key {key!r}{hint}{known}"
                issues.append(Issue(source, here, message, key_node.start_mark.line + 1))


def field_lines(node: yaml.Node | None) -> dict[str, int]:
    """Field path → 1-based line of its key (or item) in the file."""
    lines: dict[str, int] = {}

    def walk(n: Any, path: str) -> None:
        if isinstance(n, yaml.MappingNode):
            for key_node, value in n.value:
                here = f"{path}.{key_node.value}" if path else str(key_node.value)
                lines[here] = key_node.start_mark.line + 1
                walk(value, here)
        elif isinstance(n, yaml.SequenceNode):
            for i, item in enumerate(n.value):
                lines[f"{path}[{i}]"] = item.start_mark.line + 1
                walk(item, f"{path}[{i}]")

    walk(node, "")
    return lines


def line_of(lines: dict[str, int], field: str) -> int | None:
    """The line of `field`, else of its nearest enclosing field that has one."""
    while field:
        if field in lines:
            return lines[field]
        cut = max(field.rfind("."), field.rfind("["))
        field = field[:cut] if cut > 0 else ""
    return None
