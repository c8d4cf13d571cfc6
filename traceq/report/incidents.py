"""What a person reads first of a `Diagnosis`, as data: its incidents, worst first, each with
its root finding, what / impact / cause / change and the tail of the metric it hurt most in
words, and its consequences folded under it; the playbooks that errored; those that did not
run, grouped by the input that would enable them; the run's tail, one line per metric (p99
TTFT, TPOT, e2e and what their slowest requests spent their time on). The report (model.py,
render_md.py, render_html.py) and the app (traceq/app/pages/findings.py, overview.py) lay it
out; nothing here renders.

The incidents are `Diagnosis.failing()` (the engine's, traceq/playbooks/incidents.py, most
impact first): a consequence (`warn`, `see` = its root) is never a block of its own. A
diagnosis saved before incidents existed (schema 1, e.g. `traceq app --findings old.json`)
has findings that fail but no incident: each failed or warned finding then stands as an
incident of its own. One saved before the tail was explained has no `tail`: its view has
none, and nothing shows it.

The words are `traceq diagnose`'s (traceq/playbooks/story.py): the engine's headline,
message, incident lines and impact sentence, human durations, no "n/a" in a sentence.

>>> f = Finding(id="kv-pressure", status="fail", severity="high", title="KV-cache pressure",
...             message="KV cache full", fixes=["Lower max_num_seqs"])
>>> v = view(Diagnosis([f], "run.tq", "", "0", "", 0.0))     # schema 1: no incidents
>>> v.counts, v.blocks[0].change
('1 incident; 1 playbook: 1 root', 'Lower max_num_seqs')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from traceq.findings import Diagnosis, Finding, Incident, severity_rank
from traceq.playbooks import story
from traceq.playbooks.render import assumed_gpu_line
from traceq.playbooks.tail import METRICS
from traceq.playbooks.words import duration_ms


@dataclass(frozen=True)
class Block:
    """One incident as a person reads it: the incident, its root finding (None when the
    diagnosis lacks it), its consequences and whether it is new against a baseline."""

    incident: Incident
    root: Finding | None
    consequences: list[Finding]
    new: bool = False

    @property
    def when(self) -> str:
        """`from 2025-06-15 10:00:10 UTC for 50 s: 44 of 44 requests (100%) missed an SLO or
        failed`: the headline after its severity and title."""
        i = self.incident
        prefix = f"[{i.severity}] {i.title} — "
        if i.headline.startswith(prefix):
            return i.headline[len(prefix) :]
        if i.end_ns > i.start_ns:
            return f"from {story.clock(i.start_ns)} for {_duration(i.end_ns - i.start_ns)}"
        return i.headline

    @property
    def story(self) -> list[tuple[str, str]]:
        """(label, text) lines as `traceq diagnose` prints them (traceq/playbooks/story.py):
        what, impact, cause, also, undecided, change, predict (what `traceq whatif` predicts
        the change would do, where the root's playbook cites it), tail; lines without text
        left out."""
        return story.lines(self.incident, self.root)

    @property
    def change(self) -> str:
        return self.incident.fix

    @property
    def examples(self) -> list[str]:
        return self.root.example_requests if self.root is not None else []

    def overlaps(self, since: int, until: int) -> bool:
        """The incident's window meets [since, until) (ns); one without a window always does."""
        i = self.incident
        if i.end_ns <= i.start_ns:
            return True
        return i.start_ns < until and i.end_ns > since


@dataclass(frozen=True)
class Tail:
    """One metric of the run's tail: its name, its p99 in human units and the engine's
    sentence (`P99 TTFT 27 s (slowest 5 of 64 requests, from 26 s): 100 % waited in queue
    with the KV cache full`), as `traceq diagnose` prints it under "TAIL of the run"."""

    metric: str
    """TTFT, TPOT or e2e."""
    p99: str
    line: str

    @classmethod
    def of(cls, m: dict[str, Any]) -> Tail:
        p99 = m.get("p99_ms")
        return cls(
            metric=METRICS.get(m.get("metric", ""), str(m.get("metric", ""))),
            p99=duration_ms(p99) if isinstance(p99, int | float) else "",
            line=str(m["line"]),
        )


@dataclass(frozen=True)
class View:
    """A diagnosis as a person reads it (see the module docstring)."""

    blocks: list[Block]
    warnings: list[Finding]
    """`warn` findings that no incident holds (no `see`): worth a look, not an incident."""
    errors: list[Finding]
    not_run: dict[str, list[str]]
    """The input a playbook lacked → the playbooks it would enable, in catalogue order."""
    passed: list[Finding]
    explained: int
    """Findings folded under a block as consequences."""
    total: int
    compared: bool = False
    """Whether `Block.new` was judged against a baseline."""
    tail: list[Tail] = field(default_factory=list)
    """The run's tail, one per metric; empty for a diagnosis saved before it was explained."""
    assumed_gpu: str = ""
    """The line naming the playbooks that fired on GPU-scaled floors that assumed the reference
    GPU (as `traceq diagnose` prints it, traceq/playbooks/render.py); "" when none did."""

    @property
    def not_run_line(self) -> str:
        """`not run, for lack of data: GPU samples (nvidia-smi or DCGM) → gpu-underutilized`
        (as `traceq diagnose` prints it); "" when every playbook had its data."""
        if not self.not_run:
            return ""
        return "not run, for lack of data: " + "; ".join(
            f"{need} → {', '.join(ids)}" for need, ids in self.not_run.items()
        )

    @property
    def counts(self) -> str:
        """`2 incidents (1 new against the baseline); 13 playbooks: 2 roots, 3 consequences
        folded under them, 7 passed, 1 not run for lack of data`."""
        n = len(self.blocks)
        head = "no incident" if n == 0 else _plural(n, "incident")
        if self.compared:
            head += f" ({sum(b.new for b in self.blocks):,} new against the baseline)"
        return f"{head}; {self.tally}"

    @property
    def tally(self) -> str:
        """`13 playbooks: 2 roots, 3 consequences folded under them, 7 passed, …`: what each
        playbook came to."""
        n = len(self.blocks)
        parts = [
            (n, _plural(n, "root")),
            (self.explained, _plural(self.explained, "consequence")
             + f" folded under {'it' if n == 1 else 'them'}"),
            (len(self.warnings), f"{len(self.warnings):,} warned"),
            (len(self.errors), f"{len(self.errors):,} errored"),
            (len(self.passed), f"{len(self.passed):,} passed"),
            (self.skipped, f"{self.skipped:,} not run for lack of data"),
        ]  # fmt: skip
        tail = ", ".join(text for count, text in parts if count)
        return _plural(self.total, "playbook") + (f": {tail}" if tail else "")

    @property
    def skipped(self) -> int:
        return sum(len(ids) for ids in self.not_run.values())


def view(d: Diagnosis, known_roots: set[str] | None = None) -> View:
    """`d` as a `View`; with `known_roots` (the roots of a baseline's incidents) each block
    says whether its root is new against them."""
    by_id = {f.id: f for f in d.findings}
    legacy = not d.incidents and any(f.status == "fail" for f in d.findings)
    incidents = _legacy(d.findings) if legacy else d.failing()
    held = {i.root for i in incidents} | {c for i in incidents for c in i.consequences}
    blocks = [
        Block(
            incident=i,
            root=by_id.get(i.root),
            consequences=[by_id[c] for c in i.consequences if c in by_id],
            new=known_roots is not None and i.root not in known_roots,
        )
        for i in incidents
    ]
    not_run = d.not_run()
    return View(
        blocks=blocks,
        warnings=[f for f in d.findings if f.status == "warn" and f.id not in held and not f.see],
        errors=[f for f in d.findings if f.status == "error"],
        not_run=not_run,
        passed=[f for f in d.findings if f.status == "pass"],
        explained=sum(len(b.consequences) for b in blocks),
        total=len(d.findings),
        compared=known_roots is not None,
        tail=[Tail.of(m) for m in d.tail or [] if isinstance(m, dict) and m.get("line")],
        assumed_gpu=assumed_gpu_line(d),
    )


def _legacy(findings: list[Finding]) -> list[Incident]:
    """Schema 1 (no incidents): each failed or warned finding is an incident of its own."""
    failing = [f for f in findings if f.failed and not f.see]
    failing.sort(key=lambda f: (f.status != "fail", -severity_rank(f.severity), f.id))
    out = []
    for f in failing:
        windows = [w for w in f.windows if "start" in w and "end" in w]
        confirmed = [c for c in f.causes if c.status == "confirmed"]
        start = min((w["start"] for w in windows), default=0)
        end = max((w["end"] for w in windows), default=0)
        out.append(
            Incident(
                root=f.id,
                root_cause=confirmed[0].id if confirmed else None,
                title=f.title,
                severity=f.severity,
                start=story.iso(start) if windows else "",
                end=story.iso(end) if windows else "",
                headline="",
                summary=f.message,
                confidence=confirmed[0].strength if confirmed else 0.0,
                fix=f.fixes[0] if f.fixes else "",
                start_ns=start,
                end_ns=end,
            )
        )
    return out


def sentence(text: str) -> str:
    """`text` opening a sentence: its first letter upper case."""
    return text[:1].upper() + text[1:]


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def _duration(ns: int) -> str:
    return duration_ms(ns / 1e6)
