"""engine-failure on failures no bundled scenario injects, written as vLLM V1 and PyTorch
print them (the real start-up failures are in tests/test_playbooks_real.py): each gives a
failing root whose first cause quotes the log's numbers and whose change names the setting.
Table-driven: failure lines → (cause ranked first, words the change must hold)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.playbook_helpers import run
from traceq.ingest import IngestOptions, ingest

API = "(APIServer pid=7) "
CORE = "(EngineCore_DP0 pid=123) "


def at(second: int) -> str:
    return f"09-06 03:{10 + second // 60:02d}:{second % 60:02d}"


def info(second: int, where: str, msg: str, prefix: str = CORE, level: str = "INFO") -> str:
    return f"{prefix}{level} {at(second)} [{where}] {msg}"


STARTUP = [
    info(
        0,
        "utils.py:326",
        "non-default args: {'model': 'meta-llama/Llama-3.1-8B-Instruct', "
        "'max_model_len': 32768, 'gpu_memory_utilization': 0.95, "
        "'max_num_batched_tokens': 16384}",
        API,
    ),
    info(2, "gpu_model_runner.py:2007", "Model loading took 14.9889 GiB and 4.42 seconds"),
    info(20, "gpu_worker.py:276", "Available KV cache memory: 56.21 GiB"),
    info(20, "kv_cache_utils.py:849", "GPU KV cache size: 460,464 tokens"),
    info(30, "launcher.py:29", "Application startup complete.", "", ""),
]
SERVING = [
    info(40 + 5 * k, "loggers.py:123", f"Engine 000: Avg prompt throughput: 2000.0 tokens/s, "
         f"Avg generation throughput: {900 if k < 6 else 580:.1f} tokens/s, Running: 40 reqs, "
         "Waiting: 0 reqs, GPU KV cache usage: 41.0%, Prefix cache hit rate: 60.0%", API)
    for k in range(12)
]  # fmt: skip
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.15 GiB of which 1.23 GiB is free. Process {pid} has {gib} GiB memory in use. "
    "Including non-PyTorch memory, this process has 77.90 GiB memory in use."
)


def traceback(second: int, last: str) -> list[str]:
    err = f"{CORE}ERROR {at(second)} [core.py:700] "
    return [
        err + "EngineCore encountered a fatal error.",
        err + "Traceback (most recent call last):",
        err + '  File "/usr/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 691, in '
        "run_engine_core",
        err + last,
    ]


CASES = {
    "runtime OOM, the engine itself": (
        STARTUP + SERVING[:8] + traceback(82, OOM.format(pid=123, gib="77.90")),
        "runtime-oom",
        "tried to allocate 2.00 GiB with 1.23 GiB free of 79.15 GiB",
        "Lower gpu_memory_utilization from 0.95",
    ),
    "runtime OOM, another process holds memory": (
        STARTUP + SERVING[:8] + traceback(82, OOM.format(pid=4242, gib="23.00")),
        "other-process",
        "process 4242 held 23.00 GiB of the GPU",
        "Free the GPU: process 4242 is not this engine",
    ),
    "OOM while loading the weights": (
        STARTUP[:1] + traceback(3, OOM.format(pid=123, gib="77.90")),
        "weights-do-not-fit",
        "CUDA out of memory while the model was loading",
        "Raise tensor_parallel_size",
    ),
    "the engine died and was restarted": (
        STARTUP
        + SERVING[:8]
        + [
            info(
                80, "core.py:600", "RuntimeError: CUDA error: illegal memory access", level="ERROR"
            ),
            info(
                81,
                "async_llm.py:420",
                "EngineDeadError: EngineCore encountered an issue. "
                "See stack trace (above) for the root cause.",
                API,
                "ERROR",
            ),
            info(125, "api_server.py:1805", "vLLM API server version 0.10.1.1", API),
            info(150, "launcher.py:29", "Application startup complete.", "", ""),
        ],
        "engine-died",
        "the engine was starting again 44 s later",
        "Fix the first error before the EngineDeadError (RuntimeError: CUDA error: illegal",
    ),
    "KV-connector loads failed, requests recomputed": (
        STARTUP
        + SERVING
        + [
            info(
                71,
                "scheduler.py:2110",
                "Recovered from KV load failure: 310 request(s) "
                "rescheduled (79360 tokens affected).",
                level="WARNING",
            ),
            "[2025-09-06 03:11:12,089] LMCache ERROR: Num retrieved tokens: 0, num expected "
            "tokens: 256 (vllm_v1_adapter.py:528:lmcache.integration.vllm.vllm_v1_adapter)",
        ],
        "kv-connector-load",
        "79,360 tokens to recompute; 310 requests rescheduled",
        "Check the KV connector's store",
    ),
}


@pytest.fixture(scope="module")
def diagnoses(tmp_path_factory):
    root = tmp_path_factory.mktemp("engine-failure")
    out = {}
    for n, (name, (lines, *_)) in enumerate(CASES.items()):
        log = root / f"case{n}.log"
        log.write_text("\n".join(lines) + "\n")
        ingest([log], root / f"case{n}.tq", options=IngestOptions(year=2025))
        out[name] = run(root / f"case{n}.tq")
    return out


@pytest.mark.parametrize(
    ("name", "cause", "evidence", "change"), [(k, *v[1:]) for k, v in CASES.items()]
)
def test_the_failure_is_a_root_that_names_its_setting(diagnoses, name, cause, evidence, change):
    d = diagnoses[name]
    assert d.incidents and d.incidents[0].root == "engine-failure", [i.root for i in d.incidents]
    first = d.incidents[0]
    assert first.root_cause == cause
    root = {f.id: f for f in d.findings}["engine-failure"]
    assert root.status == "fail"
    assert evidence in root.causes[0].evidence, root.causes[0].evidence
    assert first.fix.startswith(change), first.fix
    assert "n/a" not in first.summary


def test_an_oom_or_death_is_critical_a_kv_load_failure_high(diagnoses):
    severity = {name: d.incidents[0].severity for name, d in diagnoses.items()}
    assert severity == {
        "runtime OOM, the engine itself": "critical",
        "runtime OOM, another process holds memory": "critical",
        "OOM while loading the weights": "critical",
        "the engine died and was restarted": "critical",
        "KV-connector loads failed, requests recomputed": "high",
    }


def test_the_throughput_after_failed_kv_loads_is_quoted(diagnoses):
    root = {f.id: f for f in diagnoses["KV-connector loads failed, requests recomputed"].findings}
    evidence = root["engine-failure"].causes[0].evidence
    assert "generation throughput 580 tokens/s in the minute after, against 900 before" in evidence


def test_a_clean_log_passes(tmp_path: Path):
    log = tmp_path / "ok.log"
    log.write_text("\n".join(STARTUP + SERVING) + "\n")
    ingest([log], tmp_path / "ok.tq", options=IngestOptions(year=2025))
    assert {f.id: f.status for f in run(tmp_path / "ok.tq").findings}["engine-failure"] == "pass"
