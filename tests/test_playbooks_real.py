"""Real server logs (tests/data/real/) give sensible findings or not_applicable, never an
error: the KV-full / preemption samples flag kv-pressure, engines that failed at start-up
give an engine-failure root naming the setting to change, an orderly SIGTERM shutdown is not
a crash."""

from __future__ import annotations

import gzip

import orjson
import pytest

from tests.playbook_helpers import REAL, run
from traceq.ingest import IngestOptions, ingest

LOGS = sorted(p for p in (REAL / "vllm").glob("*.log")) + sorted((REAL / "sglang").glob("*.log"))


@pytest.fixture(scope="module")
def diagnoses(tmp_path_factory):
    root = tmp_path_factory.mktemp("real")
    out = {}
    for log in LOGS:
        target = root / f"{log.stem}.tq"
        ingest([log], target, options=IngestOptions(year=2025))
        out[log.stem] = run(target)
    return out


def test_no_playbook_errors_on_any_real_log(diagnoses):
    errors = [(name, f.id, f.message) for name, d in diagnoses.items() for f in d.findings
              if f.status == "error"]  # fmt: skip
    assert not errors


@pytest.mark.parametrize(
    ("name", "what"),
    [
        # nothing waited: the clause is left out, not "0 requests waiting"
        ("vllm_v0_0.2.x_llm_engine_kv_near_full_single_req_hang", "KV cache up to 97%"),
        ("vllm_v0_0.4.1_stats_rate8_pending323_kv99_zhjunqin_excerpt",
         "KV cache up to 99% with 323 requests waiting"),
        ("vllm_v0_0.6.x_h100_llama405b_preempt_recompute_101_pending_reflowed_rocmblog",
         "KV cache up to 100% with 101 requests waiting and 1 preemption event"),
        # preemption warnings and no stats line: the sentence leads with what was logged
        ("vllm_v0_0.7.3_offline_a100_qwen25_7b_util0.5_recompute_preemption_cuda_blocks_tqdm_cr_symbolu_excerpt",
         "1 preemption event logged"),
    ],
)  # fmt: skip
def test_kv_full_and_preemption_logs_flag_kv_pressure(diagnoses, name, what):
    f = {f.id: f for f in diagnoses[name].findings}["kv-pressure"]
    assert f.status == "fail", f.message
    assert f.causes[0].status == "confirmed"
    assert f.message.startswith(what + " from 20"), f.message
    if "kv_near_full" in name:  # the figure keeps the 0 the sentence leaves out
        assert f.windows[0]["waiting_max"] == 0, f.windows[0]


@pytest.mark.parametrize(
    ("name", "cause", "evidence", "change"),
    [
        (
            "vllm_v1_0.10.1.1_engine_failed_negative_kv_dennislee22",
            "no-cache-memory",
            "Available KV cache memory -0.53 GiB",
            "Raise gpu_memory_utilization",
        ),
        (
            "vllm_v1_0.25.1_dgxspark_startup_fail_kv_too_small_for_262k_after_unpinned_redownload_sostrowsk",
            "context-too-long",
            "max_model_len 262,144 needs 18.35 GiB of KV cache for one request; 8.72 GiB available",
            "Lower max_model_len to 121,840 or less (now 262,144), or raise "
            "gpu_memory_utilization from 0.89",
        ),
    ],
)
def test_a_failed_start_is_a_critical_root_naming_the_setting(
    diagnoses, name, cause, evidence, change
):
    """The engine-failure root quotes the log's own numbers and names the one setting; the
    error-rate finding it causes is folded under it."""
    d = diagnoses[name]
    first = d.incidents[0]
    assert (first.root, first.root_cause, first.severity) == ("engine-failure", cause, "critical")
    assert first.fix.startswith(change), first.fix
    root = {f.id: f for f in d.findings}["engine-failure"]
    assert root.status == "fail" and root.message.startswith("the engine failed to start at ")
    assert evidence in root.causes[0].evidence
    assert [f.id for f in d.findings if f.status == "fail"] == ["engine-failure"]
    assert "error-rate" in first.consequences


def test_sigterm_shutdown_is_not_an_engine_failure(diagnoses):
    name = "vllm_v1_0.25.1_dgxspark_laguna_dflash_low_accept_400s_sigterm_enginedead_sostrowsk"
    d = diagnoses[name]
    f = {f.id: f for f in d.findings}["error-rate"]
    assert "engine_dead" not in f.message
    assert not any(c.id == "engine-failure" and c.status == "confirmed" for c in f.causes)


def test_http_errors_of_a_server_log_are_the_failures_by_kind(diagnoses):
    """A log whose failures are its access lines only (`POST /v1/chat/completions 400`, 18 of
    them, request logging off): the evidence table lists them, never empty under the
    incident that counts them."""
    name = "vllm_v1_0.13.0nv_gb10_qwen25_14b_fp8_docker_full_400_max_tokens_errors_guardkit"
    f = {f.id: f for f in diagnoses[name].findings}["error-rate"]
    assert f.status == "fail" and "18 of " in f.message
    (errors,) = [e for e in f.evidence if e.id == "errors"]
    assert [(r["error"], r["requests"]) for r in errors.rows] == [
        ("HTTP 400 POST /v1/chat/completions", 18)
    ]
    # the statuses decide every share of the failures: 400s are rejections, none a timeout
    # (408 / 504) or a client cancellation (499), not "undecided for lack of failed requests"
    causes = {c.id: (c.status, c.strength) for c in f.causes}
    assert causes["rejected-inputs"] == ("confirmed", 1.0)
    assert causes["timeouts"] == causes["client-cancelled"] == ("not_confirmed", 0.0)


def test_healthy_real_logs_raise_no_high_severity_finding(diagnoses):
    for name in (
        "vllm_v1_0.10.1.1_stats_10conc_1k_4k_A100_dennislee22_excerpt",
        "vllm_v1_0.11.2_full_startup_and_bench_conc1_4_8_llama3_8b_faradawn",
        "vllm_v1_0.21.0_docker_startup_tail_qwen3_0.6b_3090ti_routes_pufferfish",
        "vllm_v1_0.11.0_t4_sm75_embedding_startup_benign_fa2_error_xformers_fallback_zjpzhao",
    ):
        bad = [(f.id, f.message) for f in diagnoses[name].findings
               if f.status == "fail" and f.severity in ("high", "critical")]  # fmt: skip
        assert not bad, name


@pytest.mark.parametrize(
    "folder", sorted(p.name for p in (REAL / "loadtest").iterdir() if p.is_dir())
)
def test_load_test_exports_never_error(tmp_path, folder):
    target = tmp_path / "lt.tq"
    ingest([REAL / "loadtest" / folder], target)
    d = run(target)
    assert not [(f.id, f.message) for f in d.findings if f.status == "error"]
    # a client's export holds nothing of the engine's: its tail never vouches for the engine
    assert not [m["line"] for m in d.tail if "nothing unusual" in m["line"]]
    for playbook, cause in ROOT_CAUSES.get(folder, {}).items():
        (finding,) = [f for f in d.findings if f.id == playbook]
        assert finding.status == "fail" and finding.causes[0].id == cause, finding.causes
    # a test's design is not why its requests missed an SLO: never above medium
    assert all(i.severity in ("low", "medium") for i in d.incidents if i.root == "unrealistic-load")


ROOT_CAUSES = {
    # aiperf --request-cancellation-rate 10: the 11 failures are the tool's own cancellations
    # (RequestCancellationError, HTTP 499), not the server's
    "aiperf_example": {"error-rate": "client-cancelled"},
}


def test_guidellms_end_of_benchmark_cancellations_are_the_clients(tmp_path):
    """guidellm cancels the requests still in flight when a benchmark ends and lists them as
    `incomplete` (status cancelled, no error): the real export with its last 8 requests moved
    there fails error-rate on the client's cancellations, not on the server."""
    data = orjson.loads(gzip.decompress((GUIDELLM / "benchmarks.json.gz").read_bytes()))
    groups = data["benchmarks"][0]["requests"]
    cut = sorted(groups["successful"], key=lambda r: r["info"]["timings"]["request_start"])[-8:]
    for r in cut:
        r["info"]["status"] = "cancelled"
    groups["successful"] = [r for r in groups["successful"] if r not in cut]
    groups["incomplete"] = cut
    src = tmp_path / "benchmarks.json"
    src.write_bytes(orjson.dumps(data))
    ingest([src], tmp_path / "lt.tq")
    (finding,) = [f for f in run(tmp_path / "lt.tq").findings if f.id == "error-rate"]
    assert finding.status == "fail" and finding.causes[0].id == "client-cancelled"
    assert finding.causes[0].evidence.startswith("8 requests cancelled by the client (100%")


GUIDELLM = REAL / "loadtest" / "guidellm_generated"


def test_a_queue_the_stats_lines_show_for_minutes_waits_on_prefills(diagnoses):
    """vLLM 0.25.1 on a DGX Spark prefilling prompts of up to ~200 k tokens, request logging
    off: Waiting 1-3 line after line beside 1-4 running at under 8 % KV. The queue is read from
    the stats lines and put on the step budget, not the batch cap or the KV cache."""
    name = "vllm_v1_0.25.1_dgxspark_qwen38_int4_mtp_longctx_prefill_bound_queue_sostrowsk"
    f = {f.id: f for f in diagnoses[name].findings}["ttft-queueing"]
    assert f.status == "fail"
    assert f.message.startswith("requests wait in the engine's queue (up to 3 waiting beside ")
    assert (f.causes[0].id, f.causes[0].status) == ("prefill-bound", "confirmed")
    # the cap the server printed (max_num_seqs 32), not the 4 the benchmark ever ran
    assert "under its cap (32)" in f.causes[0].evidence
    assert "prompt tokens are 99." in f.causes[0].evidence
    causes = {c.id: c.status for c in f.causes}
    assert causes["concurrency-cap"] == causes["kv-saturated"] == "not_confirmed"


def test_lone_stats_lines_with_a_request_waiting_are_no_queue(diagnoses):
    """A single-user box: three lines hours apart with Waiting 1-4, each followed by none."""
    name = "vllm_v1_0.13.0nv_gb10_qwen25_14b_fp8_docker_full_400_max_tokens_errors_guardkit"
    assert {f.id: f for f in diagnoses[name].findings}["ttft-queueing"].status == "pass"


def test_the_queue_of_a_full_kv_cache_is_kv_pressures_consequence(diagnoses):
    name = "vllm_v0_0.4.1_stats_rate8_pending323_kv99_zhjunqin_excerpt"
    f = {f.id: f for f in diagnoses[name].findings}["ttft-queueing"]
    assert (f.status, f.see) == ("warn", "kv-pressure")
    assert "up to 323 waiting" in f.message
