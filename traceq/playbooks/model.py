"""What a playbook file holds, and the schema check that reports every problem at once.

A playbook is one YAML file (playbooks/README.md describes the fields). `from_dict` never
stops at the first problem: it collects each one as `Issue(file, field, message)` (the
pySigma `collect_errors` pattern), so `traceq playbooks lint` lists them all.

>>> pb, issues = Playbook.from_dict({"id": "x"}, source="x.yaml")
>>> pb is None, sorted(i.field for i in issues)[:3]
(True, ['causes', 'doc', 'false_positives'])
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from traceq.findings import SEVERITIES

SCHEMA_VERSION = 1
ID = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
PARAM_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
PARAM_REF = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
BUILTINS = ("start", "end", "root_start", "root_end")
"""Bound by the engine: the window (ns) being explained; in an `explains` check, the
consequence's window (`start`, `end`) and the root's (`root_start`, `root_end`)."""
DOC_SECTIONS = ("what", "why")
GPU_FIGURES = (
    "hbm_gb_per_s",
    "tflops_bf16",
    "tflops_fp8",
    "memory_gib",
    "prefill_time",
    "step_time",
)
"""What a parameter may take from the GPU the data names: a spec figure
(traceq/hardware/gpus.csv), or a reference duration scaled to it (traceq/playbooks/gpu.py)."""


@dataclass(frozen=True)
class Issue:
    """One problem in a playbook file: where, which field, what is wrong."""

    file: str
    field: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.field}: {self.message}"


@dataclass(frozen=True)
class Param:
    """A named threshold. `min` / `max` (in `unit`, inclusive) bound the values that give
    right answers; the default and every override must lie within them.

    >>> Param("x", 0.5, "ratio 0-1", "", "", min=0, max=1).violation(1.5)
    'must be at most 1 (ratio 0-1), got 1.5'
    """

    name: str
    default: float | int | str
    unit: str
    doc: str
    reason: str
    min: float | None = None
    max: float | None = None
    gpu: str | None = None
    """A GPU spec figure (`GPU_FIGURES`) that replaces the default when the data names the
    GPU (traceq/playbooks/gpu.py); an override (`--param`) still wins."""

    def violation(self, value: Any) -> str | None:
        """Why `value` is not allowed for this parameter, or None when it is."""
        if self.min is None and self.max is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"must be a number ({self.unit}), got {value!r}"
        if self.min is not None and value < self.min:
            return f"must be at least {self.min:g} ({self.unit}), got {value:g}"
        if self.max is not None and value > self.max:
            return f"must be at most {self.max:g} ({self.unit}), got {value:g}"
        return None


@dataclass(frozen=True)
class Requirement:
    """Data a check needs: `sql` returns one number (rows), at least `min_rows`."""

    sql: str
    needs: str
    min_rows: int = 1


@dataclass(frozen=True)
class Query:
    id: str
    title: str
    sql: str


@dataclass(frozen=True)
class CauseSpec:
    """A possible cause and its confirming check: `sql` returns one row whose `strength`
    column (0–1) says how strongly the data supports the cause; `evidence` formats it."""

    id: str
    title: str
    sql: str
    evidence: str
    confirm_at: float = 0.5
    requires: tuple[Requirement, ...] = ()
    fixes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Edge:
    """`explains:` in a root playbook: when this playbook fails, `playbook` failing in an
    overlapping window is its consequence if the mechanism holds there, checked in the
    consequence's worst window: one of the consequence's own causes (`via`) is confirmed, or
    `sql` (with `$start` / `$end` the consequence's window, `$root_start` / `$root_end` the
    root's) returns a `strength` of at least `confirm_at`."""

    playbook: str
    mechanism: str
    via: tuple[str, ...] = ()
    sql: str = ""
    confirm_at: float = 0.5


@dataclass(frozen=True)
class Prediction:
    """`prediction:` in a playbook: the setting change its finding cites a prediction of
    (`traceq whatif --set`, replayed on the run's own calibrated engine model), and the
    sentence that says it (`says`, filled with the replay's figures:
    traceq/whatif/cite.py); with `when`, only when that cause of the finding is confirmed."""

    settings: dict[str, str]
    says: str
    when: str = ""


@dataclass(frozen=True)
class Playbook:
    id: str
    title: str
    severity: str
    doc: dict[str, str]
    requires: tuple[Requirement, ...]
    params: dict[str, Param]
    symptom_sql: str
    figures_sql: str
    message: str
    causes: tuple[CauseSpec, ...]
    evidence: tuple[Query, ...]
    examples_sql: str
    fixes: tuple[str, ...]
    next_checks: tuple[str, ...]
    false_positives: tuple[str, ...]
    references: tuple[str, ...]
    tags: tuple[str, ...] = ()
    explains: tuple[Edge, ...] = ()
    prediction: Prediction | None = None
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    lines: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    """Field path → line in `source` (traceq/playbooks/keys.py), for issues found later."""

    def defaults(self) -> dict[str, Any]:
        return {name: p.default for name, p in self.params.items()}

    def queries(self) -> list[tuple[str, str]]:
        """(field, sql) of every query in the playbook, for lint and binding checks."""
        out = [(f"requires[{i}].sql", r.sql) for i, r in enumerate(self.requires)]
        out += [("symptom.sql", self.symptom_sql), ("symptom.figures", self.figures_sql)]
        for c in self.causes:
            out += [(f"causes.{c.id}.requires[{i}].sql", r.sql) for i, r in enumerate(c.requires)]
            out.append((f"causes.{c.id}.sql", c.sql))
        out += [(f"evidence.{e.id}.sql", e.sql) for e in self.evidence]
        out += [(f"explains[{i}].sql", e.sql) for i, e in enumerate(self.explains) if e.sql]
        if self.examples_sql:
            out.append(("examples.sql", self.examples_sql))
        return out

    @classmethod
    def from_dict(cls, d: Any, *, source: str) -> tuple[Playbook | None, list[Issue]]:
        """Validate `d` (a loaded YAML document); return the playbook and every issue."""
        v = _Validator(source)
        if not isinstance(d, dict):
            v.add("(file)", "a playbook is a mapping of fields")
            return None, v.issues
        if d.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
            v.add("schema_version", f"must be {SCHEMA_VERSION}")
        pid = v.text(d, "id")
        if pid and not ID.match(pid):
            v.add("id", f"{pid!r} is not kebab-case (e.g. kv-pressure)")
        severity = v.text(d, "severity")
        if severity and severity not in SEVERITIES:
            v.add("severity", f"{severity!r} is not one of {', '.join(SEVERITIES)}")
        doc = v.mapping(d, "doc")
        for section in DOC_SECTIONS:
            if doc is not None and not str(doc.get(section) or "").strip():
                v.add(f"doc.{section}", "missing (explain prints it)")
        params = v.params(d.get("params") or {})
        symptom = v.mapping(d, "symptom") or {}
        pb = cls(
            id=pid or "",
            title=v.text(d, "title") or "",
            severity=severity or "medium",
            doc={k: str(x) for k, x in (doc or {}).items()},
            requires=v.requirements(d.get("requires"), "requires", required=True),
            params=params,
            symptom_sql=v.text(symptom, "sql", "symptom.sql") or "",
            figures_sql=v.text(symptom, "figures", "symptom.figures") or "",
            message=v.text(symptom, "message", "symptom.message") or "",
            causes=v.causes(d.get("causes")),
            evidence=v.queries(d.get("evidence") or [], "evidence"),
            examples_sql=str((d.get("examples") or {}).get("sql") or ""),
            fixes=v.strings(d, "fixes", required=True),
            next_checks=v.strings(d, "next_checks"),
            false_positives=v.strings(d, "false_positives", required=True),
            references=v.strings(d, "references", required=True),
            tags=v.strings(d, "tags"),
            explains=v.edges(d.get("explains")),
            prediction=v.prediction(d.get("prediction")),
            source=source,
            raw=d,
        )
        known = set(params) | set(BUILTINS)
        for where, sql in pb.queries():
            for name in PARAM_REF.findall(sql):
                if name not in known:
                    v.add(where, f"${name} is not a declared parameter")
        when = pb.prediction.when if pb.prediction else ""
        if when and when not in {c.id for c in pb.causes}:
            v.add("prediction.when", f"{when!r} is not one of this playbook's causes")
        return (None if v.issues else pb), v.issues


class _Validator:
    """Field readers that record an Issue instead of raising."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.issues: list[Issue] = []

    def add(self, where: str, message: str) -> None:
        self.issues.append(Issue(self.source, where, message))

    def text(self, d: dict, key: str, where: str | None = None) -> str | None:
        value = d.get(key)
        if value is None or not str(value).strip():
            self.add(where or key, "missing")
            return None
        if not isinstance(value, str):
            self.add(where or key, f"must be text, got {type(value).__name__}")
            return None
        return value

    def mapping(self, d: dict, key: str) -> dict | None:
        value = d.get(key)
        if not isinstance(value, dict):
            self.add(key, "missing" if value is None else "must be a mapping")
            return None
        return value

    def strings(self, d: dict, key: str, *, required: bool = False) -> tuple[str, ...]:
        value = d.get(key)
        if value is None or value == []:
            if required:
                self.add(key, "missing (a list of at least one entry)")
            return ()
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            self.add(key, "must be a list of text entries")
            return ()
        return tuple(value)

    def params(self, d: Any) -> dict[str, Param]:
        if not isinstance(d, dict):
            self.add("params", "must be a mapping name → {default, unit, doc, reason, min, max}")
            return {}
        out = {}
        for name, spec in d.items():
            where = f"params.{name}"
            if not PARAM_NAME.match(str(name)):
                self.add(where, "parameter names are snake_case")
            if not isinstance(spec, dict):
                self.add(where, "must be a mapping {default, unit, doc, reason}")
                continue
            for key in ("default", "unit", "doc", "reason"):
                if spec.get(key) is None or str(spec.get(key)).strip() == "":
                    self.add(f"{where}.{key}", "missing")
            default = spec.get("default")
            if default is not None and not isinstance(default, int | float | str):
                self.add(f"{where}.default", "must be a number or text")
            param = Param(
                str(name),
                default if isinstance(default, int | float | str) else 0,
                str(spec.get("unit") or ""),
                str(spec.get("doc") or ""),
                str(spec.get("reason") or ""),
                min=self.bound(spec, "min", where),
                max=self.bound(spec, "max", where),
                gpu=self.gpu_figure(spec, where),
            )
            if param.min is not None and param.max is not None and param.min > param.max:
                self.add(f"{where}.min", f"min {param.min:g} is above max {param.max:g}")
            elif default is not None and (problem := param.violation(default)):
                self.add(f"{where}.default", problem)
            out[str(name)] = param
        return out

    def gpu_figure(self, spec: dict, where: str) -> str | None:
        """An optional `gpu:` of a parameter: the spec figure it takes from the GPU."""
        value = spec.get("gpu")
        if value is None:
            return None
        if value not in GPU_FIGURES:
            self.add(f"{where}.gpu", f"{value!r} is not one of {', '.join(GPU_FIGURES)}")
            return None
        return str(value)

    def bound(self, spec: dict, key: str, where: str) -> float | None:
        """An optional `min` / `max` of a parameter: a number, else an issue."""
        value = spec.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.add(f"{where}.{key}", f"must be a number in the parameter's unit, got {value!r}")
            return None
        return value

    def requirements(self, value: Any, where: str, *, required: bool) -> tuple[Requirement, ...]:
        if not value:
            if required:
                self.add(where, "missing: say which data the playbook needs")
            return ()
        if not isinstance(value, list):
            self.add(where, "must be a list of {sql, needs, min_rows}")
            return ()
        out = []
        for i, r in enumerate(value):
            here = f"{where}[{i}]"
            if not isinstance(r, dict):
                self.add(here, "must be a mapping {sql, needs, min_rows}")
                continue
            sql = self.text(r, "sql", f"{here}.sql")
            needs = self.text(r, "needs", f"{here}.needs")
            rows = r.get("min_rows", 1)
            if not isinstance(rows, int) or rows < 0:
                self.add(f"{here}.min_rows", "must be a non-negative integer")
                rows = 1
            out.append(Requirement(sql or "", needs or "", rows))
        return tuple(out)

    def queries(self, value: Any, where: str) -> tuple[Query, ...]:
        if not isinstance(value, list):
            self.add(where, "must be a list of {id, title, sql}")
            return ()
        out = []
        for i, q in enumerate(value):
            here = f"{where}[{i}]"
            if not isinstance(q, dict):
                self.add(here, "must be a mapping {id, title, sql}")
                continue
            out.append(
                Query(
                    self.text(q, "id", f"{here}.id") or "",
                    self.text(q, "title", f"{here}.title") or "",
                    self.text(q, "sql", f"{here}.sql") or "",
                )
            )
        return tuple(out)

    def causes(self, value: Any) -> tuple[CauseSpec, ...]:
        if not isinstance(value, list) or not value:
            self.add("causes", "missing: a list of causes, each with its confirming check")
            return ()
        out, seen = [], set()
        for i, c in enumerate(value):
            here = f"causes[{i}]"
            if not isinstance(c, dict):
                self.add(here, "must be a mapping")
                continue
            cid = self.text(c, "id", f"{here}.id") or ""
            if cid in seen:
                self.add(f"{here}.id", f"duplicate cause id {cid!r}")
            seen.add(cid)
            confirm = c.get("confirm_at", 0.5)
            if not isinstance(confirm, int | float) or not 0 <= confirm <= 1:
                self.add(f"{here}.confirm_at", "must be a number 0-1")
                confirm = 0.5
            fixes = c.get("fixes") or []
            out.append(
                CauseSpec(
                    id=cid,
                    title=self.text(c, "title", f"{here}.title") or "",
                    sql=self.text(c, "sql", f"{here}.sql") or "",
                    evidence=self.text(c, "evidence", f"{here}.evidence") or "",
                    confirm_at=float(confirm),
                    requires=self.requirements(
                        c.get("requires"), f"{here}.requires", required=False
                    ),
                    fixes=tuple(str(x) for x in fixes) if isinstance(fixes, list) else (),
                )
            )
        return tuple(out)

    def prediction(self, value: Any) -> Prediction | None:
        """`prediction:` {set: {knob: value}, says, when}."""
        if value is None:
            return None
        if not isinstance(value, dict):
            self.add("prediction", "must be a mapping {set, says, when}")
            return None
        settings = value.get("set")
        if not isinstance(settings, dict) or not settings:
            self.add("prediction.set", "must map `traceq whatif --set` keys to values")
            settings = {}
        says = self.text(value, "says", "prediction.says") or ""
        when = value.get("when") or ""
        if not isinstance(when, str):
            self.add("prediction.when", "must be a cause id")
            when = ""
        return Prediction({str(k): _setting(x) for k, x in settings.items()}, says, when)

    def edges(self, value: Any) -> tuple[Edge, ...]:
        """`explains:` entries: {playbook, mechanism, via | sql, confirm_at}."""
        if value is None:
            return ()
        if not isinstance(value, list):
            self.add("explains", "must be a list of {playbook, mechanism, via or sql}")
            return ()
        out = []
        for i, e in enumerate(value):
            here = f"explains[{i}]"
            if not isinstance(e, dict):
                self.add(here, "must be a mapping {playbook, mechanism, via or sql}")
                continue
            via = e.get("via") or []
            via = [via] if isinstance(via, str) else via
            if not isinstance(via, list) or not all(isinstance(x, str) for x in via):
                self.add(f"{here}.via", "must be a cause id or a list of cause ids")
                via = []
            sql = str(e.get("sql") or "")
            if bool(via) == bool(sql.strip()):
                self.add(here, "needs one check: `via` (the consequence's causes) or `sql`")
            confirm = e.get("confirm_at", 0.5)
            if not isinstance(confirm, int | float) or not 0 <= confirm <= 1:
                self.add(f"{here}.confirm_at", "must be a number 0-1")
                confirm = 0.5
            out.append(
                Edge(
                    playbook=self.text(e, "playbook", f"{here}.playbook") or "",
                    mechanism=self.text(e, "mechanism", f"{here}.mechanism") or "",
                    via=tuple(via),
                    sql=sql,
                    confirm_at=float(confirm),
                )
            )
        return tuple(out)


def _setting(value: Any) -> str:
    """A `prediction.set` value as `--set` spells it (YAML reads `on` as true)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)
