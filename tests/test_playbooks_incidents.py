"""What a person reads from `traceq diagnose`: incidents, not symptoms, in words without
holes. Every bundled scenario in every format; the JSON contract; bad playbooks refused with
file:line."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace

import orjson
import pytest
from click.testing import CliRunner

from tests.playbook_helpers import SAMPLES
from traceq.cli import cli
from traceq.findings import SCHEMA_VERSION
from traceq.playbooks import builtin_dir, diagnose, load_catalog
from traceq.playbooks.render import render_markdown, render_text
from traceq.session import Session
from traceq.whatif.cite import cite

SCENARIOS = sorted(p.name for p in SAMPLES.iterdir() if p.is_dir())
# a millisecond figure of 7 or more digits ("p99 TTFT 17346762 ms") is not a human unit
LONG_MS = re.compile(r"\d[\d,]{6,} ?ms\b")
INCIDENT_KEYS = {
    "root", "root_cause", "consequences", "start", "end", "requests_affected", "confidence",
    "alternatives", "summary",
}  # fmt: skip


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), standalone_mode=True)


def _formats(ds: str) -> dict[str, str]:
    """What `traceq diagnose --format text|markdown|json` prints, from one run of the engine
    (the command renders the same Diagnosis each way: traceq/cli/diagnose.py)."""
    with Session(ds) as session:
        playbooks = load_catalog().playbooks
        result = diagnose(session, playbooks)
        cite(session, result, playbooks)
    return {
        "text": render_text(result),
        "markdown": render_markdown(result),
        "json": orjson.dumps(result.to_dict(), option=orjson.OPT_INDENT_2).decode(),
    }


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_format_reads_without_holes(demo_run, scenario):
    outputs = _formats(str(demo_run.dataset(scenario)))
    for fmt, output in outputs.items():
        assert "n/a" not in output.lower(), (fmt, output)
        assert not LONG_MS.search(output), (fmt, LONG_MS.search(output))
        assert "\x00" not in output
    text = outputs["text"].splitlines()
    if scenario == "healthy":
        assert text[-1].startswith("no incident;"), text
    else:
        assert text[0].startswith("INCIDENT 1 ["), text[0]
    na = [x for x in text if x.startswith("N/A")]
    assert not na, na  # playbooks without their data are one line, not one line each


def test_json_contract(demo_run):
    r = invoke("diagnose", str(demo_run.dataset("kv-pressure")), "--format", "json")
    data = json.loads(r.output)
    assert data["schema_version"] == SCHEMA_VERSION and data["findings"]
    first = data["incidents"][0]
    assert set(first) >= INCIDENT_KEYS
    assert first["root"] == "kv-pressure" and first["root_cause"] == "kv-budget-small"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", first["start"])
    assert first["start"] < first["end"] and first["requests_affected"] > 0
    assert 0 <= first["confidence"] <= 1
    assert all(set(a) == {"id", "why"} for a in first["alternatives"])
    assert {"ttft-queueing", "slow-decode"} <= set(first["consequences"])
    by_id = {f["id"]: f for f in data["findings"]}
    for cid in first["consequences"]:
        assert (by_id[cid]["status"], by_id[cid]["see"]) == ("warn", "kv-pressure")
    # one plain paragraph: what, how bad, why, what to change
    assert "KV" in first["summary"] and "What to change:" in first["summary"]
    assert "\n" not in first["summary"]


def test_requests_no_engine_served_count_in_the_incidents_impact(demo_run):
    """A router's 503s never reach an engine (no request_phases row); the headline and the
    impact still count them, as the finding does."""
    r = invoke("diagnose", str(demo_run.dataset("disaggregated")))
    head, what, impact = r.output.splitlines()[:3]
    assert head.endswith(": 4 of 50 requests (8%) missed an SLO or failed"), head
    assert "4 of 50 requests failed" in what
    assert impact.startswith("  impact: 50 requests arrived in the window (92% met every SLO")
    assert "; 4 failed; p99 TTFT" in impact  # no "losing 0 generated tokens"


def test_the_na_playbooks_say_which_input_enables_them(tmp_path):
    from tests.playbook_helpers import ingest_folder

    folder = tmp_path / "no-gpu"
    shutil.copytree(SAMPLES / "queue-overload", folder)
    for name in ("nvidia-smi.csv", "dcgm.prom"):
        (folder / name).unlink()
    out = invoke("diagnose", str(ingest_folder(folder, tmp_path / "ds.tq"))).output
    line = next(x for x in out.splitlines() if x.startswith("not run, for lack of data:"))
    assert "GPU utilisation samples" in line and "→ gpu-underutilized" in line, line


def _copy(tmp_path, pid: str) -> str:
    return (builtin_dir() / f"{pid}.yaml").read_text()


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda t: t.replace("    evidence: \"KV ≥", "    evidense: \"KV ≥", 1),
         r"kv-pressure\.yaml:\d+: causes\[0\]\.evidense: unknown key 'evidense' "
         r"\(did you mean 'evidence'\?\)"),
        (lambda t: t.replace("  - playbook: ttft-queueing", "  - playbook: ttft-queuing", 1),
         r"kv-pressure\.yaml:\d+: explains\[0\]\.playbook: no playbook 'ttft-queuing'"),
        (lambda t: t.replace("via: kv-saturated", "via: kv-saturation", 1),
         r"kv-pressure\.yaml:\d+: explains\[0\]\.via: ttft-queueing has no cause 'kv-saturation'"),
    ],
)  # fmt: skip
def test_a_bad_playbook_is_refused_with_file_and_line(tmp_path, edit, expected):
    (tmp_path / "kv-pressure.yaml").write_text(edit(_copy(tmp_path, "kv-pressure")))
    r = invoke("playbooks", "lint", str(tmp_path))
    assert r.exit_code == 1 and re.search(expected, r.output), r.output
    r = invoke("diagnose", str(tmp_path / "none.tq"), "--playbooks", str(tmp_path))
    assert r.exit_code == 2 and re.search(expected, r.output), r.output


def test_a_cycle_of_explains_is_refused(tmp_path):
    """kv-pressure explains ttft-queueing; ttft-queueing explaining kv-pressure closes a loop
    in which each would hide the other."""
    text = _copy(tmp_path, "ttft-queueing").replace(
        "explains:\n",
        "explains:\n  - playbook: kv-pressure\n    mechanism: a loop\n    via: kv-saturated\n",
        1,
    )
    (tmp_path / "ttft-queueing.yaml").write_text(text)
    r = invoke("playbooks", "lint", str(tmp_path))
    assert r.exit_code == 1, r.output
    assert re.search(r"ttft-queueing\.yaml:\d+: explains\[0\]\.playbook: cycle: ", r.output)
    r = invoke("diagnose", str(tmp_path / "none.tq"), "--playbooks", str(tmp_path))
    assert r.exit_code == 2 and "cycle: " in r.output, r.output


def test_a_consequence_between_the_roots_windows_is_near_it():
    """A root that fires across the run (ttft-prefill on uncached prompts) covers the windows
    between its own: a queue-bound window there is never one of its prefill-bound windows,
    yet its queue is behind those prefills. One a minute past the root's last window is not
    near it."""
    from traceq.playbooks.incidents import _near

    s = 1_000_000_000
    root = [{"start": 0, "end": 14 * s}, {"start": 200 * s, "end": 214 * s}]
    assert _near({"start": 100 * s, "end": 114 * s}, root, 14 * s)
    assert _near({"start": 228 * s, "end": 242 * s}, root, 14 * s)
    assert not _near({"start": 274 * s, "end": 288 * s}, root, 14 * s)
    assert not _near({"start": 100 * s, "end": 114 * s}, [], 14 * s)


@pytest.mark.parametrize(
    ("message", "sentence"),
    [
        ("KV cache up to {no_such_figure:.0%}", "seen from 2025-06-15 10:00:10 UTC for 50 s"),
        (
            "[KV cache up to {no_such_figure:.0%}] from {start_at}[ ({kv_max:.0%} at most)]",
            "seen from 2025-06-15 10:00:10 UTC (100% at most)",
        ),
    ],
)
def test_a_sentence_that_lost_its_figures_still_says_when(demo_run, message, sentence):
    """A message whose lead figure is missing on this dataset is never an empty line, nor a
    sentence that starts with "from"."""
    (kv,) = [p for p in load_catalog().playbooks if p.id == "kv-pressure"]
    with Session(demo_run.dataset("kv-pressure")) as s:
        d = diagnose(s, [replace(kv, message=message)])
    (f,) = d.findings
    assert f.status == "fail" and f.message == sentence
