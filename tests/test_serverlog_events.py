"""Server-log events a playbook reads: start-up settings (`setting_*`), CUDA OOM details
(`oom`, `oom_*_gib`) and KV-connector load failures (`kv_load_failed`, `kv_load_rescheduled`),
from real samples (tests/data/real/vllm/) and from lines written as their producers print them
(the producer source of each is named in traceq/ingest/serverlog/patterns.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.serverlog_helpers import VLLM, ingest_log, ns, rows
from traceq.ingest.serverlog import events as ev

SOSTROWSK = VLLM / (
    "vllm_v1_0.25.1_dgxspark_startup_fail_kv_too_small_for_262k_after_unpinned_redownload_"
    "sostrowsk.log"
)
V1 = "(EngineCore_DP0 pid=123) ERROR 09-06 03:10:08 [core.py:700] "
OOM_2_1 = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.15 GiB of which 1.23 GiB is free. Process 12345 has 77.90 GiB memory in use. "
    "Process 2222 has 512.00 MiB memory in use. Including non-PyTorch memory, this process has "
    "23.10 GiB memory in use. Of the allocated memory 75.30 GiB is allocated by PyTorch, and "
    "1.20 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large "
    "try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
    "documentation for Memory Management  "
    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def events(con, like: str) -> list[tuple]:
    return rows(
        con,
        "SELECT line, kind, value, severity, request_id, message FROM events "
        f"WHERE kind LIKE '{like}' ORDER BY line, kind, message",
    )


def accounted(entry: dict, path: Path) -> None:
    """Every physical line is a record (stored or counted), a continuation or blank."""
    n_lines = path.read_bytes().count(b"\n")
    lines = entry["lines"]
    assert lines["total"] == n_lines
    assert sum(entry["records"].values()) + lines["blank"] + lines["continuation"] == n_lines
    assert entry["quarantined"] == 0


# --- settings ---------------------------------------------------------------------------------


def test_real_startup_failure_settings_and_kv_cache(tmp_path: Path) -> None:
    con, entry = ingest_log(SOSTROWSK, tmp_path, year=2026)
    got = {k: (line, v, m) for line, k, v, _, _, m in events(con, "setting_%") if line == 7}
    assert got == {
        "setting_max_model_len": (7, 262144.0, "max_model_len=262144"),
        "setting_gpu_memory_utilization": (7, 0.89, "gpu_memory_utilization=0.89"),
        "setting_max_num_seqs": (7, 32.0, "max_num_seqs=32"),
        # The top-level model, not speculative_config's own `'model': '…DFlash-INT4'`.
        "setting_model": (7, None, "model=poolside/Laguna-S-2.1-INT4"),
    }
    # The engine config line (24) gives the effective values too; the consumer takes the latest.
    latest = rows(con, "SELECT value FROM events WHERE kind = 'setting_max_model_len' "
                       "ORDER BY ts DESC, line DESC LIMIT 1")  # fmt: skip
    assert latest == [(262144.0,)]
    assert ("setting_quantization", "quantization=compressed-tensors") in {
        (k, m) for line, k, _, _, _, m in events(con, "setting_%") if line == 24
    }
    (line, _, value, severity, _, message) = events(con, "kv_cache_insufficient")[0]
    assert (line, value, severity) == (127, None, "ERROR")
    assert "18.35 GiB" in message and "121840" in message
    assert "settings" not in entry["unrecognised"]


def test_real_negative_kv_memory(tmp_path: Path) -> None:
    con, _ = ingest_log(VLLM / "vllm_v1_0.10.1.1_engine_failed_negative_kv_dennislee22.log",
                        tmp_path, year=2025)  # fmt: skip
    assert [r[:4] for r in events(con, "startup_kv_available_gib")] == [
        (1, "startup_kv_available_gib", -0.53, "INFO")
    ]
    assert [r[:4] for r in events(con, "engine_start_failed")] == [
        (2, "engine_start_failed", None, "ERROR")
    ]


SETTING_LINES = [
    (
        "V1 non-default args, nested dicts",
        "(APIServer pid=1) INFO 09-06 03:00:00 [utils.py:326] non-default args: {'model_tag': "
        "'m', 'speculative_config': {'model': 'draft', 'max_model_len': 4096}, 'model': "
        "'org/Model-7B', 'dtype': 'bfloat16', 'tensor_parallel_size': 4, "
        "'max_num_batched_tokens': 16384, 'kv_cache_dtype': 'fp8', 'quantization': 'fp8', "
        "'enable_chunked_prefill': False}",
        {
            "setting_chunked_prefill": (None, "enable_chunked_prefill=False"),
            "setting_model": (None, "model=org/Model-7B"),
            "setting_dtype": (None, "dtype=bfloat16"),
            "setting_tensor_parallel_size": (4.0, "tensor_parallel_size=4"),
            "setting_max_num_batched_tokens": (16384.0, "max_num_batched_tokens=16384"),
            "setting_kv_cache_dtype": (None, "kv_cache_dtype=fp8"),
            "setting_quantization": (None, "quantization=fp8"),
        },
    ),
    (
        "V1 engine config line",
        "(EngineCore_DP0 pid=2) INFO 09-06 03:00:05 [core.py:74] Initializing a V1 LLM engine "
        "(v0.10.1.1) with config: model='/models/llama', speculative_config=SpeculativeConfig("
        "method='eagle', model='/models/eagle', num_spec_tokens=3), tokenizer='/models/llama', "
        "dtype=torch.bfloat16, max_seq_len=32768, tensor_parallel_size=4, "
        "pipeline_parallel_size=2, quantization=fp8, enforce_eager=False, kv_cache_dtype=auto, "
        'compilation_config={"level":3,"max_num_seqs":9}, chunked_prefill_enabled=True',
        {
            "setting_chunked_prefill": (None, "chunked_prefill_enabled=True"),
            "setting_model": (None, "model=/models/llama"),
            "setting_dtype": (None, "dtype=torch.bfloat16"),
            "setting_max_model_len": (32768.0, "max_seq_len=32768"),
            "setting_tensor_parallel_size": (4.0, "tensor_parallel_size=4"),
            "setting_pipeline_parallel_size": (2.0, "pipeline_parallel_size=2"),
            "setting_quantization": (None, "quantization=fp8"),
            "setting_kv_cache_dtype": (None, "kv_cache_dtype=auto"),
        },
    ),
    (
        "V0 args Namespace (None is no setting)",
        "INFO 09-06 03:00:00 api_server.py:529] args: Namespace(subparser='serve', model_tag="
        "'m', served_model_name=None, model='meta-llama/Llama-3.1-8B-Instruct', dtype='auto', "
        "max_model_len=None, gpu_memory_utilization=0.9, max_num_seqs=256, quantization=None, "
        "enable_chunked_prefill=None, tensor_parallel_size=1)",
        {
            "setting_model": (None, "model=meta-llama/Llama-3.1-8B-Instruct"),
            "setting_dtype": (None, "dtype=auto"),
            "setting_gpu_memory_utilization": (0.9, "gpu_memory_utilization=0.9"),
            "setting_max_num_seqs": (256.0, "max_num_seqs=256"),
            "setting_tensor_parallel_size": (1.0, "tensor_parallel_size=1"),
        },
    ),
    (
        "effective chunked-prefill budget",
        "(APIServer pid=1) INFO 09-06 03:00:01 [scheduler.py:222] Chunked prefill is enabled "
        "with max_num_batched_tokens=2048.",
        {"setting_max_num_batched_tokens": (2048.0, "max_num_batched_tokens=2048")},
    ),
]


@pytest.mark.parametrize(("line", "expect"), [c[1:] for c in SETTING_LINES],
                         ids=[c[0] for c in SETTING_LINES])  # fmt: skip
def test_setting_lines(tmp_path: Path, line: str, expect: dict) -> None:
    path = write(tmp_path / "s.log", [line])
    con, entry = ingest_log(path, tmp_path, year=2025)
    got = {k: (v, m) for _, k, v, severity, _, m in events(con, "setting_%")}
    assert got == expect
    assert {r[3] for r in events(con, "setting_%")} == {"INFO"}
    accounted(entry, path)


def test_every_setting_kind_is_documented() -> None:
    ingest_doc = (Path(__file__).parent.parent / "docs" / "INGEST.md").read_text()
    assert all(f"`{s.kind}`" in ingest_doc for s in ev.SETTINGS)
    assert [s.kind for s in ev.SETTINGS] == [
        "setting_gpu_memory_utilization",
        "setting_max_model_len",
        "setting_max_num_seqs",
        "setting_max_num_batched_tokens",
        "setting_tensor_parallel_size",
        "setting_pipeline_parallel_size",
        "setting_model",
        "setting_dtype",
        "setting_quantization",
        "setting_kv_cache_dtype",
        "setting_chunked_prefill",
    ]


# --- CUDA OOM ---------------------------------------------------------------------------------


def test_oom_in_a_logged_traceback(tmp_path: Path) -> None:
    lines = [
        V1 + "EngineCore encountered a fatal error.",
        V1 + "Traceback (most recent call last):",
        V1 + '  File "/usr/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 691, in '
        "run_engine_core",
        V1 + "    engine_core.run_busy_loop()",
        V1 + "    ^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        V1 + OOM_2_1,
    ]
    path = write(tmp_path / "oom.log", lines)
    con, entry = ingest_log(path, tmp_path, year=2025)
    got = [r[:5] for r in events(con, "oom%")]
    assert got == [
        (6, "oom", 2.0, "ERROR", None),  # one error; its details are INFO
        (6, "oom_free_gib", 1.23, "INFO", None),
        (6, "oom_process_gib", 77.9, "INFO", None),
        (6, "oom_process_gib", 0.5, "INFO", None),
        (6, "oom_total_gib", 79.15, "INFO", None),
    ]
    messages = [r[5] for r in events(con, "oom%")]
    assert messages[0].startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate")
    assert messages[1:] == [
        "of which 1.23 GiB is free",
        "Process 12345 has 77.90 GiB memory in use",
        "Process 2222 has 512.00 MiB memory in use",
        "GPU 0 has a total capacity of 79.15 GiB",
    ]
    assert rows(con, "SELECT DISTINCT ts FROM events WHERE kind LIKE 'oom%'") == [
        (ns("2025-09-06 03:10:08"),)
    ]
    assert entry["unrecognised"] == {"traceback": 4}
    assert [r[1] for r in events(con, "error")] == ["error"]  # line 1 only
    accounted(entry, path)


OOM_LINES = [
    (
        "torch < 2.1, raw",
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 79.35 GiB total "
        "capacity; 76.01 GiB already allocated; 9.19 MiB free; 77.44 GiB reserved in total by "
        "PyTorch)",
        {"oom": 20 / 1024, "oom_total_gib": 79.35, "oom_free_gib": 9.19 / 1024},
    ),
    (
        "torch 2.1 `capacty`, ROCm, bytes",
        "(VllmWorkerProcess pid=5) torch.OutOfMemoryError: HIP out of memory. Tried to allocate "
        "512 bytes. GPU 3 has a total capacty of 191.98 GiB of which 0 bytes is free.",
        {"oom": 512 / 2**30, "oom_total_gib": 191.98, "oom_free_gib": 0.0},
    ),
    (
        "deep in a long message",
        "ERROR 09-06 03:10:08 [multiproc_executor.py:1] Worker failed: " + "x" * 1200 + " "
        + OOM_2_1,
        {"oom": 2.0, "oom_total_gib": 79.15, "oom_free_gib": 1.23, "oom_process_gib": 77.9},
    ),
    (
        "the CUDA runtime's own error (a kernel launch, no sizes)",
        "(VllmWorker TP0 pid=7) ERROR 09-06 03:10:08 [multiproc_executor.py:1] "
        "RuntimeError: CUDA error: out of memory",
        {"oom": None},
    ),
]  # fmt: skip


@pytest.mark.parametrize(("line", "expect"), [c[1:] for c in OOM_LINES],
                         ids=[c[0] for c in OOM_LINES])  # fmt: skip
def test_oom_variants(tmp_path: Path, line: str, expect: dict) -> None:
    path = write(tmp_path / "o.log", ["INFO 09-06 03:10:00 [core.py:1] start", line])
    con, entry = ingest_log(path, tmp_path, year=2025)
    got = {k: v for _, k, v, _, _, _ in events(con, "oom%") if k != "oom_process_gib" or v > 1}
    assert got == pytest.approx(expect)
    (message,) = [m for _, k, _, _, _, m in events(con, "oom") if k == "oom"]
    if expect["oom"] is not None:
        assert "out of memory. Tried to allocate" in message[:80]  # the numbers are kept
    severities = {k: sev for _, k, _, sev, _, _ in events(con, "oom%")}
    assert severities.pop("oom") == "ERROR" and set(severities.values()) <= {"INFO"}
    accounted(entry, path)


# --- KV-connector load failures ---------------------------------------------------------------

KV_LINES = [
    (
        "vLLM scheduler, policy fail",
        "(EngineCore_DP0 pid=9) ERROR 09-06 03:11:00 [scheduler.py:2101] Failing 2 request(s) "
        "due to KV load failure (failure_policy=fail, 1024 tokens affected). Request IDs: "
        "{'cmpl-a-0', 'cmpl-b-0'}",
        ("kv_load_failed", 1024.0, "ERROR", None),
    ),
    (
        "vLLM scheduler, policy recompute",
        "(EngineCore_DP0 pid=9) WARNING 09-06 03:11:00 [scheduler.py:2110] Recovered from KV "
        "load failure: 3 request(s) rescheduled (768 tokens affected).",
        ("kv_load_rescheduled", 3.0, "WARNING", None),
    ),
    (
        "NIXL transfer failure",
        "(EngineCore_DP0 pid=9) ERROR 09-06 03:11:00 [nixl_connector.py:1198] NIXL transfer "
        "failure: transfer_failed. Marking blocks as invalid | Context: {'failure_type': "
        "'transfer_failed', 'request_id': 'cmpl-c-0', 'engine_id': 'dcbc', 'remote_engine_id': "
        "'prefill-0', 'remote_request_id': 'prefill-cmpl-c-0', 'remote_host': '10.0.0.5', "
        "'remote_port': 5600, 'num_local_blocks': 12, 'num_remote_blocks': 12, "
        "'local_block_ids_sample': [10, 11, 12], 'xfer_state': 'ERR'}",
        ("kv_load_failed", 12.0, "ERROR", "cmpl-c-0"),
    ),
    (
        "NIXL handshake failure (no request)",
        "(EngineCore_DP0 pid=9) ERROR 09-06 03:11:00 [nixl_connector.py:1198] NIXL transfer "
        "failure: handshake_setup_failed | Context: {'failure_type': 'handshake_setup_failed', "
        "'request_id': None, 'engine_id': '2ef8', 'remote_engine_id': 'remote_engine'}",
        ("kv_load_failed", None, "ERROR", None),
    ),
    (
        "NIXL before the structured log",
        "(EngineCore_DP0 pid=9) ERROR 09-06 03:11:00 [nixl_connector.py:2281] NIXL transfer "
        "setup/initiation failed for request cmpl-d-0. Marking blocks as invalid.",
        ("kv_load_failed", None, "ERROR", "cmpl-d-0"),
    ),
    (
        "LMCache adapter shortfall",
        "(EngineCore_DP0 pid=9) [2025-09-06 03:11:00,089] LMCache ERROR: Num retrieved tokens: "
        "0, num expected tokens: 130 (vllm_v1_adapter.py:528:lmcache.integration.vllm."
        "vllm_v1_adapter)",
        ("kv_load_failed", 130.0, "ERROR", None),
    ),
    (
        "LMCache retrieve, old format",
        "(RayWorkerWrapper pid=999) [2025-09-06 03:11:00,089] LMCache INFO: Retrieved 0 out of "
        "32 out of total 32 tokens (cache_engine.py:499:lmcache.v1.cache_engine)",
        ("kv_load_failed", 32.0, "ERROR", None),
    ),
    (
        "LMCache retrieve, partial, unprefixed",
        "[2025-09-06 03:11:00,711] LMCache INFO: [req_id=cmpl-e-0] Retrieved 256 out of 1792 "
        "required tokens (from 1792 total tokens). size: 0.0292 gb, cost 3.2 ms, throughput: "
        "9.1 GB/s; (cache_engine.py:874:lmcache.v1.cache_engine)",
        ("kv_load_failed", 1536.0, "ERROR", "cmpl-e-0"),
    ),
    (
        "LMCache retrieve, complete (no failure)",
        "(EngineCore_DP0 pid=9) [2025-09-06 03:11:00,711] LMCache INFO: [req_id=cmpl-f-0] "
        "Retrieved 1792 out of 1792 required tokens (from 1792 total tokens). size: 0.2461 gb, "
        "cost 14.3 ms, throughput: 17.2 GB/s; (cache_engine.py:812:lmcache.v1.cache_engine)",
        None,
    ),
]


@pytest.mark.parametrize(("line", "expect"), [c[1:] for c in KV_LINES],
                         ids=[c[0] for c in KV_LINES])  # fmt: skip
def test_kv_load_failures(tmp_path: Path, line: str, expect: tuple | None) -> None:
    # After a vLLM record: an LMCache line is a record of its own, never a continuation.
    head = "(APIServer pid=1) INFO 09-06 03:10:59 [async_llm.py:270] Added request cmpl-x-0."
    path = write(tmp_path / "kv.log", [head, line])
    con, entry = ingest_log(path, tmp_path, year=2025)
    got = [r[1:5] for r in events(con, "kv_load%")]
    assert got == ([expect] if expect else [])
    if expect:
        (message,) = [r[5] for r in events(con, "kv_load%")]
        assert line.endswith(message)  # the whole message, without the log prefix
        assert rows(con, "SELECT line FROM events WHERE kind LIKE 'kv_load%'") == [(2,)]
    else:
        assert entry["unrecognised"] == {"kv_retrieve": 1}
    assert entry["lines"]["continuation"] == 0
    accounted(entry, path)


def test_lmcache_failure_sequence_as_logged(tmp_path: Path) -> None:
    """LMCache issue 1094: one failed retrieve, as an unprefixed log shows it."""
    lines = [
        "INFO 09-25 00:42:05 [async_llm.py:270] Added request chatcmpl-2c45.",
        "[2025-09-25 00:42:05,968] LMCache INFO: Reqid: chatcmpl-2c45, Total tokens 130, LMCache "
        "hit tokens: 130, need to load: 130 (vllm_v1_adapter.py:1048:lmcache.integration.vllm."
        "vllm_v1_adapter)",
        "[2025-09-25 00:42:06,089] LMCache INFO: Retrieved 0 out of 130 out of total 130 tokens "
        "(cache_engine.py:508:lmcache.v1.cache_engine)",
        "[2025-09-25 00:42:06,089] LMCache ERROR: The number of retrieved tokens is less than the "
        "expected number of tokens! This should not happen! (vllm_v1_adapter.py:524:lmcache."
        "integration.vllm.vllm_v1_adapter)",
        "[2025-09-25 00:42:06,089] LMCache ERROR: Num retrieved tokens: 0, num expected tokens: "
        "130 (vllm_v1_adapter.py:528:lmcache.integration.vllm.vllm_v1_adapter)",
        "INFO 09-25 00:42:07 [async_llm.py:270] Finished request chatcmpl-2c45.",
    ]
    path = write(tmp_path / "lmc.log", lines)
    con, entry = ingest_log(path, tmp_path, year=2025)
    # The cache engine's shortfall and the adapter's check: one row each.
    assert [r[:3] for r in events(con, "kv_load%")] == [
        (3, "kv_load_failed", 130.0),
        (5, "kv_load_failed", 130.0),
    ]
    assert rows(con, "SELECT DISTINCT ts FROM events WHERE kind = 'kv_load_failed'") == [
        (ns("2025-09-25 00:42:05"),)
    ]
    assert entry["unrecognised"] == {"lmcache": 2}
    assert entry["lines"]["continuation"] == 0
    accounted(entry, path)
