"""Shared by the app tests: a sample scenario ingested once, and findings built from it the way
the playbook engine reports them (traceq/findings.py), so the Findings page is tested on real
request ids and windows of the dataset."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import orjson

from traceq.findings import Diagnosis, Finding, Incident
from traceq.session import Session

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"
SCENARIO = "kv-pressure"


def ingest_sample(workdir: Path, env) -> Path:
    """Ingest sample_traces/SCENARIO through the app's own loader into `workdir` (the app's
    work folder, set in the environment through the MonkeyPatch `env`)."""
    from traceq.app import opening

    env.setenv(opening.ENV_WORKDIR, str(workdir))
    return opening.open_sample(SCENARIO, lambda share, text: None)


def kv_finding(dataset: Path) -> Finding:
    """A kv-pressure finding as the engine would report it on this dataset: its window is
    where the engine waited with the KV cache full, its examples the slowest requests."""
    with Session(dataset) as s:
        full = s.query(
            "SELECT min(ts) AS lo, max(ts) AS hi, max(waiting) AS waiting FROM engine_stats "
            "WHERE kv_usage >= 0.99"
        ).row(0, named=True)
        evidence = s.query(
            "SELECT ts, kv_usage, running, waiting FROM engine_stats ORDER BY ts"
        ).to_dicts()
        slow = s.query(
            "SELECT request_id FROM request_phases ORDER BY e2e_ms DESC, request_id LIMIT 3"
        )["request_id"].to_list()
    return Finding.from_dict(
        {
            "id": "kv-pressure",
            "status": "fail",
            "severity": "high",
            "title": "KV-cache pressure",
            "message": f"KV cache full with up to {full['waiting']} requests waiting",
            "causes": [
                {
                    "id": "long_prompts",
                    "title": "A burst of long prompts",
                    "status": "not_confirmed",
                    "strength": 0.2,
                    "evidence": "p99 prompt 2 k tokens",
                },
                {
                    "id": "max_num_seqs",
                    "title": "max_num_seqs admits more than the KV budget",
                    "status": "confirmed",
                    "strength": 0.9,
                    "evidence": "KV 100 % for 30 s",
                },
            ],
            "evidence": [
                {
                    "id": "kv_series",
                    "title": "Engine KV usage and queue",
                    "sql": "SELECT ts, kv_usage, running, waiting FROM engine_stats ORDER BY ts",
                    "columns": ["ts", "kv_usage", "running", "waiting"],
                    "rows": evidence,
                }
            ],
            "windows": [{"start": full["lo"], "end": full["hi"] + 10**9, "kv_usage": 1.0}],
            "example_requests": slow,
            "fixes": ["Lower max_num_seqs", "Raise gpu_memory_utilization"],
            "next_checks": ["Compare --max-num-seqs with the offered concurrency"],
            "references": ["seeds part 1 §5.3"],
        }
    )


TTFT_TAIL = "P99 TTFT 27 s (slowest 5 of 64 requests, from 26 s): 100 % waited in queue with " \
    "the KV cache full"  # fmt: skip
E2E_TAIL = "P99 e2e 31 s (slowest 5 of 64 requests, from 30 s): 80 % waited in queue with the " \
    "KV cache full; 20 % were decoding with nothing unusual in the engine"  # fmt: skip
TPOT_TAIL = "P99 TPOT 42 ms (slowest 5 of 64 requests, from 40 ms): 100 % decoded with the KV " \
    "cache full"  # fmt: skip


def tail(metric: str, p99_ms: float, threshold_ms: float, line: str, groups: list[dict]) -> dict:
    """One metric's tail as traceq/playbooks/tail.py reports it: the slowest 5 of 64."""
    return {"metric": metric, "p99_ms": p99_ms, "threshold_ms": threshold_ms, "tail": 5,
            "requests": 64, "groups": groups, "line": line}  # fmt: skip


def queued(share: float) -> dict:
    return {"phase": "queue", "state": "kv-full", "requests": round(5 * share), "share": share,
            "ahead_tokens": None, "kv_max": 1.0}  # fmt: skip


def kv_incident(kv: Finding, consequences: list[str]) -> Incident:
    """The incident the engine makes of `kv` (traceq/playbooks/incidents.py), worded as
    traceq/playbooks/story.py words it."""
    w = kv.windows[0]
    start = datetime.fromtimestamp(w["start"] / 1e9, UTC)
    seconds = round((w["end"] - w["start"]) / 1e9)
    return Incident(
        root=kv.id,
        root_cause="max_num_seqs",
        title=kv.title,
        severity="high",
        start=start.strftime("%Y-%m-%dT%H:%M:%SZ"),
        end=datetime.fromtimestamp(w["end"] / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        headline=f"[high] {kv.title} — from {start:%Y-%m-%d %H:%M:%S} UTC for {seconds} s: "
        "30 of 40 requests (75%) missed an SLO or failed",
        summary=f"{kv.title}: {kv.message}.",
        consequences=consequences,
        requests_affected=40,
        confidence=0.9,
        impact={"requests_in": 40, "missed_in": 30, "ttft_p99_in_ms": 27_000.0},
        fix=kv.fixes[0],
        start_ns=w["start"],
        end_ns=w["end"],
        tail=[tail("ttft", 27_000.0, 26_000.0, TTFT_TAIL, [queued(1.0)])],
    )


def write_findings(dataset: Path, path: Path) -> Path:
    """A diagnosis as `traceq diagnose --format json` writes it (schema 2): one incident,
    kv-pressure, with ttft-queueing as its consequence and its TTFT tail; a playbook that passed
    and one that lacked its data; the run's tail (TTFT, TPOT, e2e)."""
    quiet = Finding(
        id="error-rate", status="pass", severity="high", title="Errors", message="no failed request"
    )
    lacking = Finding(id="gpu-underutilized", status="not_applicable", severity="medium",
                      title="GPU underutilized", message="not enough data: needs GPU "
                      "utilisation samples (nvidia-smi or DCGM) (none found)")  # fmt: skip
    queueing = Finding(id="ttft-queueing", status="warn", severity="high",
                       title="TTFT dominated by queueing", message="queueing is 94% of TTFT",
                       see="kv-pressure")  # fmt: skip
    kv = kv_finding(dataset)
    diagnosis = Diagnosis(
        findings=[quiet, kv, queueing, lacking],
        dataset=str(dataset),
        dataset_hash="",
        traceq_version="test",
        started_at="2025-06-15T10:05:00Z",
        elapsed_s=0.1,
        incidents=[kv_incident(kv, [queueing.id])],
        tail=[
            tail("ttft", 27_000.0, 26_000.0, TTFT_TAIL, [queued(1.0)]),
            tail("tpot", 42.0, 40.0, TPOT_TAIL, [{**queued(1.0), "phase": "decode"}]),
            tail(
                "e2e",
                31_000.0,
                30_000.0,
                E2E_TAIL,
                [queued(0.8), {**queued(0.2), "phase": "decode", "state": "none"}],
            ),
        ],
    )
    path.write_bytes(orjson.dumps(diagnosis.to_dict()))
    return path
