"""Real vLLM and SGLang server logs (tests/data/real/, see PROVENANCE.md there): every sample
ingests, with the exact number of stats rows and values read from named lines."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.serverlog_helpers import SGLANG, VLLM, ingest_log, ns, rows

# Stats lines per sample, counted independently of the parser (see `_count_stats_lines`).
STATS_LINES = {
    "vllm_v0_0.2.x_llm_engine_kv_near_full_single_req_hang.log": 3,
    "vllm_v0_0.4.1_startup_llama3_8b_3090_gpu_blocks_cudagraph_zhjunqin.log": 0,
    "vllm_v0_0.4.1_stats_rate8_pending323_kv99_zhjunqin_excerpt.log": 6,
    "vllm_v0_0.6.3_metrics349_stats_with_http_access_lines.log": 19,
    "vllm_v0_0.6.3post1_pp4_request_logging_received_added_finished_uvicorn_mapcoder.log": 81,
    "vllm_v0_0.6.4dev_rocm_mi300x_tp8_offline_baseline_80rps_ansi_workers_mi300testing.log": 0,
    "vllm_v0_0.6.4dev_rocm_mi300x_tp8_offline_chunked_prefill512_regression_37rps_mi300testing.log": 0,  # noqa: E501
    # The first of its two stats records is cut at the file start: quarantined, not counted.
    "vllm_v0_0.6.x_h100_llama405b_preempt_recompute_101_pending_reflowed_rocmblog.log": 1,
    "vllm_v0_0.7.3_offline_a100_qwen25_7b_util0.5_recompute_preemption_cuda_blocks_tqdm_cr_symbolu_excerpt.log": 0,  # noqa: E501
    "vllm_v1_0.10.1.1_engine_failed_negative_kv_dennislee22.log": 0,
    "vllm_v1_0.10.1.1_startup_gpuutil0.25_A100_dennislee22.log": 0,
    "vllm_v1_0.10.1.1_stats_10conc_1k_4k_A100_dennislee22_excerpt.log": 8,
    "vllm_v1_0.11.0_t4_sm75_embedding_startup_benign_fa2_error_xformers_fallback_zjpzhao.log": 0,
    "vllm_v1_0.11.2_full_startup_and_bench_conc1_4_8_llama3_8b_faradawn.log": 12,
    "vllm_v1_0.13.0nv_gb10_qwen25_14b_fp8_docker_full_400_max_tokens_errors_guardkit.log": 251,
    "vllm_v1_0.20.0_dgxspark_mtp_specdecoding_metrics_qwen36_35b_nvfp4_excerpt.log": 12,
    "vllm_v1_0.21.0_docker_startup_tail_qwen3_0.6b_3090ti_routes_pufferfish.log": 0,
    "vllm_v1_0.25.1_dgxspark_laguna_dflash_low_accept_400s_sigterm_enginedead_sostrowsk.log": 65,
    "vllm_v1_0.25.1_dgxspark_qwen38_int4_mtp_longctx_prefill_bound_queue_sostrowsk.log": 126,
    "vllm_v1_0.25.1_dgxspark_startup_fail_kv_too_small_for_262k_after_unpinned_redownload_sostrowsk.log": 0,  # noqa: E501
    "vllm_v1_0.7.4dev_ascend_startup_request_lifecycle_shen-shanshan.log": 4,
    "vllm_v1_0.8.5post1_deepseek_r1_14b_kv_1x_concurrency_404_model_name_request_logging_jayashan10.log": 10,  # noqa: E501
    "sglang_2025-07_vlm_prefill_decode_TP0_timestamps.log": 11,
}
QUARANTINED = {
    "vllm_v0_0.6.x_h100_llama405b_preempt_recompute_101_pending_reflowed_rocmblog.log": 2
}
SAMPLES = sorted([*VLLM.glob("*.log"), *SGLANG.glob("*.log")])


def _count_stats_lines(path: Path) -> int:
    """Physical lines with a vLLM / SGLang log prefix and a stats message (plain `re`)."""
    prefix = re.compile(r"^(?:\x1b\[[0-9;]*m)?(?:\([^)]*\)(?:\x1b\[[0-9;]*m)? )*[A-Z]+ \d\d-\d\d ")
    sglang = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:]+ [^\]]*\] (?:Prefill|Decode) batch")
    n = 0
    for line in path.read_text(errors="replace").split("\n"):
        if sglang.match(line) or (prefix.match(line) and "Avg prompt throughput" in line):
            n += 1
    return n


def test_every_sample_is_listed() -> None:
    assert sorted(p.name for p in SAMPLES) == sorted(STATS_LINES)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name[:48])
def test_sample_ingests_and_accounts_for_every_line(path: Path, tmp_path: Path) -> None:
    con, entry = ingest_log(path, tmp_path, year=2025)
    assert entry["format"] == ("sglang-log" if path.parent == SGLANG else "vllm-log")
    stats = rows(con, "SELECT count(*) FROM engine_stats")[0][0]
    assert stats == STATS_LINES[path.name]
    if path.name not in QUARANTINED:  # the reflowed sample has one stats line split in two
        assert stats == _count_stats_lines(path)
    assert entry["quarantined"] == QUARANTINED.get(path.name, 0)
    # Every physical line is a record (stored or counted), a continuation or blank.
    lines = entry["lines"]
    data = path.read_bytes()
    n_lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    assert lines["total"] == n_lines
    assert sum(entry["records"].values()) + lines["blank"] + lines["continuation"] == n_lines
    assert entry["clock_domain"] == "log_local_time"
    assert entry["assumptions"] == {
        "year": 2025,
        "year_from": "--year",
        "tz": "UTC",
        "year_wraps": 0,
    }


def _events(con, kind: str) -> list[tuple]:
    return rows(
        con, f"SELECT line, value, severity FROM events WHERE kind = '{kind}' ORDER BY line"
    )


def test_a_log_that_starts_with_a_blank_line_is_a_log(tmp_path: Path) -> None:
    """Captured stdout often starts with an empty line: 0x0a, the first byte of a bare OTLP
    protobuf message. It is read as the vLLM log it is, every stats line kept."""
    name = "vllm_v1_0.10.1.1_stats_10conc_1k_4k_A100_dennislee22_excerpt.log"
    path = tmp_path / name
    path.write_bytes(b"\n" + (VLLM / name).read_bytes())
    con, entry = ingest_log(path, tmp_path, year=2025)
    assert entry["format"] == "vllm-log"
    assert rows(con, "SELECT count(*) FROM engine_stats") == [(STATS_LINES[name],)]
    assert rows(con, "SELECT count(*) FROM quarantine") == [(0,)]


def _docker_t(i: int, line: bytes) -> bytes:  # `docker logs -t`, `kubectl logs --timestamps`
    return b"2024-11-11T15:%02d:%02d.123456789Z " % (i // 60 % 60, i % 60) + line


COLLECTORS = {
    "docker logs -t": _docker_t,
    "docker compose logs": lambda i, line: b"\x1b[36mvllm-1  |\x1b[0m " + line,
    "docker compose logs -t": lambda i, line: b"vllm-1  | " + _docker_t(i, line),
    "kubectl logs --prefix": lambda i, line: b"[pod/vllm-0/vllm] " + line,
    "a node's CRI log file": lambda i, line: _docker_t(i, b"stdout F " + line),
    "Docker's json-file log": lambda i, line: json.dumps(
        {"log": line.decode() + "\n", "stream": "stdout", "time": "2024-11-11T15:09:07Z"},
        separators=(",", ":"),
    ).encode(),
}


@pytest.mark.parametrize("collector", COLLECTORS)
def test_a_container_runtimes_line_prefix_is_removed(collector: str, tmp_path: Path) -> None:
    """A log taken with `docker logs -t`, `docker compose logs`, `kubectl logs`, from a
    node's /var/log/pods or Docker's own files wraps every line of the server's: the same
    stats, events and requests as the server's own log, at the server's own stamps."""
    name = "vllm_v0_0.6.3post1_pp4_request_logging_received_added_finished_uvicorn_mapcoder.log"
    lines = (VLLM / name).read_bytes().split(b"\n")
    path = tmp_path / "prefixed.log"
    prefix = COLLECTORS[collector]
    path.write_bytes(b"\n".join(prefix(i, line) if line else line for i, line in enumerate(lines)))
    plain, _ = ingest_log(VLLM / name, tmp_path / "plain", year=2024)
    got, entry = ingest_log(path, tmp_path / "prefixed", year=2024)
    assert entry["format"] == "vllm-log"
    for sql in (
        "SELECT * EXCLUDE (source_id, instance) FROM engine_stats ORDER BY ALL",
        "SELECT ts, kind, value, message FROM events ORDER BY ALL",
        "SELECT request_id, t_arrival, t_done, output_tokens FROM requests ORDER BY ALL",
    ):
        want = rows(plain, sql)
        assert want and rows(got, sql) == want, sql
    assert rows(got, "SELECT count(*) FROM quarantine") == [(0,)]


@pytest.mark.parametrize(
    "collector", ["docker logs -t", "a node's CRI log file", "Docker's json-file log"]
)
def test_the_runtimes_stamps_give_the_year(collector: str, tmp_path: Path) -> None:
    """vLLM prints no year; the runtime's UTC stamps on the same lines do. Without `--year`
    they set it, whatever the file's mtime (here 2030), with no warning."""
    name = "vllm_v0_0.6.3post1_pp4_request_logging_received_added_finished_uvicorn_mapcoder.log"
    lines = (VLLM / name).read_bytes().split(b"\n")
    path = tmp_path / "prefixed.log"
    prefix = COLLECTORS[collector]
    path.write_bytes(b"\n".join(prefix(i, line) if line else line for i, line in enumerate(lines)))
    os.utime(path, (1_893_456_000, 1_893_456_000))
    plain, _ = ingest_log(VLLM / name, tmp_path / "plain", year=2024)
    got, entry = ingest_log(path, tmp_path / "prefixed")
    assert entry["assumptions"]["year"] == 2024, entry["assumptions"]
    assert "container runtime" in entry["assumptions"]["year_from"]
    assert not entry.get("warnings")
    sql = "SELECT ts, running, waiting, kv_usage FROM engine_stats ORDER BY ALL"
    assert rows(got, sql) == rows(plain, sql)


def test_v0_2023_kv_near_full(tmp_path: Path) -> None:
    con, _ = ingest_log(VLLM / "vllm_v0_0.2.x_llm_engine_kv_near_full_single_req_hang.log",
                        tmp_path, year=2023)  # fmt: skip
    got = rows(con, "SELECT ts, engine, prompt_tps, gen_tps, running, swapped, waiting, kv_usage,"
                    " cpu_kv_usage, prefix_hit_rate FROM engine_stats WHERE line = 3")  # fmt: skip
    assert got == [(ns("2023-12-16 00:58:06"), 0, 0.0, 311.1, 1, 0, 0, 0.973, 0.0, None)]


def test_v1_stats_with_engine_index_and_process(tmp_path: Path) -> None:
    con, _ = ingest_log(
        VLLM / "vllm_v1_0.10.1.1_stats_10conc_1k_4k_A100_dennislee22_excerpt.log", tmp_path,
        year=2025,
    )  # fmt: skip
    got = rows(con, "SELECT ts, process, gen_tps, running, waiting, kv_usage, prefix_hit_rate,"
                    " swapped FROM engine_stats WHERE line = 2")  # fmt: skip
    assert got == [
        (ns("2025-09-02 13:08:20"), "APIServer pid=158", 240.2, 10, 0, 0.047, 0.537, None)
    ]


def test_v1_startup_hard_wrapped(tmp_path: Path) -> None:
    con, _ = ingest_log(VLLM / "vllm_v1_0.10.1.1_startup_gpuutil0.25_A100_dennislee22.log",
                        tmp_path, year=2025)  # fmt: skip
    got = dict(rows(con, "SELECT kind, value FROM events WHERE value IS NOT NULL "
                         "AND kind NOT LIKE 'setting_%'"))  # fmt: skip
    assert got == {
        "startup_weights_load_s": 3.03,
        "startup_model_load_gib": 14.2488,
        "startup_model_load_s": 4.422213,
        "startup_torch_compile_s": 67.30,
        "startup_kv_available_gib": 5.01,
        "startup_kv_tokens": 93872.0,
        "startup_max_concurrency": 5.73,
        "cuda_graph": 3.0,
        "cuda_graph_gib": 0.50,
        "startup_engine_init_s": 89.58,
        # Lines 48-49: `… num_gpu_blocks is` / `: 5867`, cut by the terminal mid-record.
        "startup_gpu_blocks": 5867.0,
    }
    assert _events(con, "startup_gpu_blocks") == [(48, 5867.0, "INFO")]
    # The wrapped warning (lines 51-52) is joined without a space at the terminal's cut.
    (msg,) = rows(con, "SELECT message FROM events WHERE kind = 'warning'")[0]
    assert "Hugging Face generation config" in msg
    assert rows(con, "SELECT ts FROM events WHERE kind = 'startup_engine_init_s'") == [
        (ns("2025-09-04 01:04:32"),)
    ]
    # Line 3-4: `non-default args` cut by the terminal inside the model name (`'Qwe` / `n2-…`).
    settings = rows(con, "SELECT line, kind, value, message FROM events "
                         "WHERE kind LIKE 'setting_%' AND line = 3 ORDER BY kind")  # fmt: skip
    assert settings == [
        (3, "setting_gpu_memory_utilization", 0.25, "gpu_memory_utilization=0.25"),
        (3, "setting_max_model_len", 16384.0, "max_model_len=16384"),
        (3, "setting_model", None, "model=Qwen2-7B-Instruct"),
    ]


def test_kv_cache_failure_is_an_error_event(tmp_path: Path) -> None:
    con, _ = ingest_log(VLLM / "vllm_v1_0.10.1.1_engine_failed_negative_kv_dennislee22.log",
                        tmp_path, year=2025)  # fmt: skip
    assert _events(con, "startup_kv_available_gib") == [(1, -0.53, "INFO")]
    assert _events(con, "engine_start_failed") == [(2, None, "ERROR")]


def test_kv_too_small_for_max_len(tmp_path: Path) -> None:
    con, _ = ingest_log(
        VLLM / "vllm_v1_0.25.1_dgxspark_startup_fail_kv_too_small_for_262k_after_unpinned_"
        "redownload_sostrowsk.log", tmp_path, year=2026,
    )  # fmt: skip
    assert _events(con, "startup_model_load_gib") == [(85, 95.46, "INFO")]
    assert _events(con, "startup_model_load_s") == [(85, 2736.589904, "INFO")]
    kinds = {r[0] for r in rows(con, "SELECT kind FROM events WHERE severity = 'ERROR'")}
    assert {"kv_cache_insufficient", "engine_start_failed"} <= kinds
    assert _events(con, "kv_cache_insufficient")[0] == (127, None, "ERROR")


def test_v0_reflowed_preemption_keeps_the_cumulative_counter(tmp_path: Path) -> None:
    path = VLLM / "vllm_v0_0.6.x_h100_llama405b_preempt_recompute_101_pending_reflowed_rocmblog.log"
    con, _ = ingest_log(path, tmp_path, year=2025)
    assert rows(
        con, "SELECT line, value, request_id, ts FROM events WHERE kind = 'preemption'"
    ) == [(7, 101.0, "cmpl-d5a0bb826fd54a568fa9c8ae9382a1cb-0", ns("2025-01-21 05:05:14"))]
    # Lines 16-21: a stats record reflowed over five lines with a blank one in between.
    got = rows(con, "SELECT line, gen_tps, running, waiting, kv_usage FROM engine_stats")
    assert got == [(16, 1529.6, 155, 101, 0.995)]
    reasons = rows(con, "SELECT location, reason FROM quarantine ORDER BY location")
    fragment = "stats fragment without a log prefix"
    assert reasons == [("line 1", fragment), ("line 4", fragment)]


def test_v0_preemption_glued_after_tqdm_and_cuda_blocks(tmp_path: Path) -> None:
    path = VLLM / (
        "vllm_v0_0.7.3_offline_a100_qwen25_7b_util0.5_recompute_preemption_cuda_blocks_tqdm_cr_"
        "symbolu_excerpt.log"
    )
    con, _ = ingest_log(path, tmp_path, year=2025)
    assert rows(con, "SELECT line, value, request_id FROM events WHERE kind = 'preemption'") == [
        (25, 1.0, "57")
    ]
    assert _events(con, "startup_gpu_blocks") == [(22, 28310.0, "INFO")]
    assert _events(con, "startup_cpu_blocks") == [(22, 4681.0, "INFO")]
    assert _events(con, "startup_engine_init_s") == [(24, 7.5, "INFO")]


def test_v0_request_lifecycle_and_coarse_requests(tmp_path: Path) -> None:
    path = VLLM / (
        "vllm_v0_0.6.3post1_pp4_request_logging_received_added_finished_uvicorn_mapcoder.log"
    )
    con, entry = ingest_log(path, tmp_path, year=2024)
    counts = dict(rows(con, "SELECT kind, count(*) FROM events WHERE kind LIKE 'request_%' "
                            "GROUP BY kind"))  # fmt: skip
    assert counts == {"request_received": 42, "request_added": 42, "request_finished": 41}
    assert entry["rows"]["requests"] == 41  # the last request never finished
    req = "chat-391ac413d67248bba4a66f8774bb7ea8"
    got = rows(
        con,
        "SELECT view, t_arrival, t_queued, t_last_token, prompt_tokens, max_tokens, "
        "time_resolution_ns, finish_reason, model FROM requests "
        f"WHERE request_id = '{req}'",
    )
    assert got == [("server", ns("2024-11-11 15:10:56"), ns("2024-11-11 15:10:56"),
                    ns("2024-11-11 15:11:32"), 421, 130651, 1_000_000_000, None,
                    "meta-llama/Llama-3.1-8B-Instruct")]  # fmt: skip
    # Prompt text is never stored: not in events, not anywhere the dataset can be queried.
    assert rows(con, "SELECT count(*) FROM events WHERE message LIKE '%begin_of_text%'") == [(0,)]
    assert rows(con, "SELECT count(*) FROM quarantine") == [(0,)]


def test_http_access_status_codes(tmp_path: Path) -> None:
    path = VLLM / (
        "vllm_v1_0.13.0nv_gb10_qwen25_14b_fp8_docker_full_400_max_tokens_errors_guardkit.log"
    )
    con, _ = ingest_log(path, tmp_path, year=2026)
    codes = dict(rows(con, "SELECT value, count(*) FROM events WHERE kind = 'http' GROUP BY 1"))
    assert codes == {200.0: 294, 400.0: 18}
    got = rows(con, "SELECT ts, prompt_tps, gen_tps, running, kv_usage, prefix_hit_rate "
                    "FROM engine_stats WHERE line = 351")  # fmt: skip
    assert got == [(ns("2026-03-18 14:32:24"), 0.0, 3.4, 0, 0.0, 0.833)]


def test_404_for_wrong_model_name(tmp_path: Path) -> None:
    path = VLLM / (
        "vllm_v1_0.8.5post1_deepseek_r1_14b_kv_1x_concurrency_404_model_name_request_logging_"
        "jayashan10.log"
    )
    con, _ = ingest_log(path, tmp_path, year=2025)
    assert _events(con, "http")[0] == (63, 404.0, "INFO")
    assert _events(con, "startup_kv_tokens") == [(rows(con, "SELECT line FROM events WHERE kind"
                                                        " = 'startup_kv_tokens'")[0][0], 32832.0,
                                                  "INFO")]  # fmt: skip
    assert [v for _, v, _ in _events(con, "startup_max_concurrency")] == [1.0]


def test_negative_graph_memory_and_compilation_seconds(tmp_path: Path) -> None:
    con, _ = ingest_log(
        VLLM / "vllm_v1_0.11.2_full_startup_and_bench_conc1_4_8_llama3_8b_faradawn.log", tmp_path
    )
    assert _events(con, "cuda_graph_gib") == [(42, -0.41, "INFO")]
    assert _events(con, "startup_engine_init_s") == [(43, 23.02, "INFO")]
    con, _ = ingest_log(
        VLLM / "vllm_v1_0.21.0_docker_startup_tail_qwen3_0.6b_3090ti_routes_pufferfish.log",
        tmp_path / "b",
    )
    assert _events(con, "startup_engine_init_s") == [(2, 18.03, "INFO")]
    assert _events(con, "startup_compilation_s") == [(2, 10.69, "INFO")]


def test_benign_startup_error_and_sigterm_engine_dead(tmp_path: Path) -> None:
    con, _ = ingest_log(
        VLLM / "vllm_v1_0.11.0_t4_sm75_embedding_startup_benign_fa2_error_xformers_fallback_"
        "zjpzhao.log", tmp_path,
    )  # fmt: skip
    assert _events(con, "error") == [(16, None, "ERROR")]
    assert _events(con, "startup_gpu_blocks") != []
    con, _ = ingest_log(
        VLLM / "vllm_v1_0.25.1_dgxspark_laguna_dflash_low_accept_400s_sigterm_enginedead_"
        "sostrowsk.log", tmp_path / "b",
    )  # fmt: skip
    assert _events(con, "shutdown")[0] == (491, None, "INFO")
    assert _events(con, "engine_dead")[0] == (510, None, "ERROR")
    codes = dict(rows(con, "SELECT value, count(*) FROM events WHERE kind = 'http' GROUP BY 1"))
    assert codes == {200.0: 93, 400.0: 3}


def test_ansi_worker_prefixes(tmp_path: Path) -> None:
    path = VLLM / (
        "vllm_v0_0.6.4dev_rocm_mi300x_tp8_offline_baseline_80rps_ansi_workers_mi300testing.log"
    )
    con, _ = ingest_log(path, tmp_path, year=2024)
    assert len(_events(con, "cuda_graph")) == 8  # one per TP worker
    procs = rows(con, "SELECT DISTINCT process FROM events WHERE kind = 'cuda_graph' "
                      "AND process IS NOT NULL")  # fmt: skip
    assert len(procs) == 7 and all(p.startswith("VllmWorkerProcess pid=") for (p,) in procs)
    assert [v for _, v, _ in _events(con, "startup_gpu_blocks")] == [639907.0]


def test_sglang_prefill_and_decode(tmp_path: Path) -> None:
    con, entry = ingest_log(SGLANG / "sglang_2025-07_vlm_prefill_decode_TP0_timestamps.log",
                            tmp_path)  # fmt: skip
    got = rows(con, "SELECT line, ts, batch, new_seqs, new_tokens, cached_tokens, num_tokens, "
                    "kv_usage, running, waiting, gen_tps, cuda_graph, ranks, engine "
                    "FROM engine_stats WHERE line IN (1, 2) ORDER BY line")  # fmt: skip
    assert got == [
        (1, ns("2025-07-18 15:32:52.498932"), "prefill", 1, 2192, 35, 35, 0.0, 0, 0, None, None,
         "TP0", 0),
        (2, ns("2025-07-18 15:32:54.159394"), "decode", None, None, None, 2266, 0.0, 1, 0, 3.13,
         True, "TP0", 0),
    ]  # fmt: skip
    assert entry["unrecognised"] == {}
