"""Bad load-test input: truncated JSON, mismatched array lengths, NaN / null latencies, unknown
versions with extra keys, garbage lines: quarantine rows or a clear message, never a crash,
and every good record still ingested. Also: other families' JSON is never claimed."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import polars as pl
import pytest

import traceq
from tests.loadtest_factory import vllm_result, workload
from traceq.dataset import Dataset
from traceq.ingest import IngestOptions, InputError, ingest
from traceq.ingest.loadtest import sniff
from traceq.ingest.source import Source

REAL = Path(__file__).parent / "data" / "real" / "loadtest"
LLMPERF = REAL / "llmperf" / "llmperf_leaderboard_individual_responses_together_70b.json"
AIPERF = REAL / "aiperf_example" / "aiperf_example_run1_profile_export.jsonl"


def table(ds: Path, name: str) -> pl.DataFrame:
    con = traceq.open(ds)
    return pl.from_arrow(con.sql(f"SELECT * FROM {name}").to_arrow_table())  # type: ignore[return-value]


def test_truncated_json_array_keeps_the_complete_records(tmp_path: Path) -> None:
    data = LLMPERF.read_bytes()
    cut = data.index(b'"ttft_s"', len(data) // 2)  # inside record ~75
    path = tmp_path / "llmperf_individual_responses.json"
    path.write_bytes(data[:cut])
    complete = data[:cut].count(b'"end_to_end_latency_s"')  # records that were fully written
    [result] = ingest([path], tmp_path / "t.tq")
    assert result.format == "llmperf"
    assert result.rows["requests"] == complete and 60 < complete < 90
    [row] = table(tmp_path / "t.tq", "quarantine").rows(named=True)
    assert row["reason"].startswith("truncated JSON array")
    assert row["location"].startswith("offset ")


def test_truncated_json_object_is_one_quarantine_row(tmp_path: Path) -> None:
    with gzip.open(REAL / "guidellm_generated" / "benchmarks.json.gz") as fh:
        data = fh.read()
    path = tmp_path / "benchmarks.json"
    path.write_bytes(data[: len(data) // 3])
    [result] = ingest([path], tmp_path / "t.tq")
    assert result.format == "guidellm" and result.rows == {} and result.quarantined == 1
    reason = table(tmp_path / "t.tq", "quarantine")["reason"][0]
    assert reason.startswith("truncated JSON document")


def test_mismatched_vllm_arrays_quarantine_the_run_but_keep_its_summary(tmp_path: Path) -> None:
    doc = vllm_result(workload())
    doc["itls"] = doc["itls"][:-1]
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps(doc))
    [result] = ingest([path], tmp_path / "t.tq")
    assert result.rows.get("requests", 0) == 0 and result.rows["tool_metrics"] > 0
    reason = table(tmp_path / "t.tq", "quarantine")["reason"][0]
    assert "different lengths" in reason and "itls 11" in reason and "ttfts 12" in reason


def test_mismatched_genai_perf_request_is_quarantined_alone(tmp_path: Path) -> None:
    with gzip.open(REAL / "genai_perf_generated" / "profile_export.json.gz") as fh:
        doc = json.load(fh)
    requests = doc["experiments"][0]["requests"]
    requests[7]["response_timestamps"] = requests[7]["response_timestamps"][:-2]
    path = tmp_path / "profile_export.json"
    path.write_text(json.dumps(doc))
    [result] = ingest([path], tmp_path / "t.tq")
    assert result.rows["requests"] == 49 and result.quarantined == 1
    q = table(tmp_path / "t.tq", "quarantine").row(0, named=True)
    assert q["location"] == "experiment 0 request 7" and "differ in length" in q["reason"]
    assert "mortimer" not in q["raw"]  # prompt text is redacted even in quarantine


def test_nan_and_null_latencies(tmp_path: Path) -> None:
    doc = vllm_result(workload())
    doc["ttfts"][0] = float("nan")  # Python's json writes NaN, which strict JSON rejects
    doc["ttfts"][1] = None
    vllm = tmp_path / "vllm.json"
    vllm.write_text(json.dumps(doc))
    records = json.loads(LLMPERF.read_text())
    records[4]["ttft_s"] = None
    records[9]["end_to_end_latency_s"] = -1.0
    llm = tmp_path / "x_individual_responses.json"
    llm.write_text(json.dumps(records))
    lines = AIPERF.read_text().splitlines()
    lines[19] = lines[19].replace('"ttft":{"value":730.147344', '"ttft":{"value":NaN')
    lines[20] = lines[20].replace('"request_latency":{"value":', '"request_latency":{"valu":')
    aiperf = tmp_path / "profile_export.jsonl"
    aiperf.write_text("\n".join(lines) + "\n")
    results = {r.format: r for r in ingest([vllm, llm, aiperf], tmp_path / "t.tq")}
    assert (results["vllm-bench"].rows["requests"], results["vllm-bench"].quarantined) == (10, 2)
    assert (results["llmperf"].rows["requests"], results["llmperf"].quarantined) == (148, 2)
    assert (results["aiperf"].rows["requests"], results["aiperf"].quarantined) == (98, 2)
    q = table(tmp_path / "t.tq", "quarantine")
    assert set(q["location"]) >= {"line 1 request 0", "line 1 request 1", "record 4", "record 9"}
    assert set(q["location"]) >= {"line 20", "line 21"}


def test_unknown_version_with_extra_keys_is_read_and_counted(tmp_path: Path) -> None:
    doc = vllm_result(workload())
    doc["a_key_from_a_future_version"] = {"nested": [1, 2]}
    doc["per_request_new_list"] = [[1]] * 12
    vllm = tmp_path / "vllm.json"
    vllm.write_text(json.dumps(doc))
    lines = AIPERF.read_text().splitlines()
    extra = [
        line.replace('{"metadata":{', '{"new_block":{"x":[1,2]},"metadata":{"new_field":3,', 1)
        for line in lines
    ]
    aiperf = tmp_path / "profile_export.jsonl"
    aiperf.write_text("\n".join(extra) + "\n")
    results = {r.format: r for r in ingest([vllm, aiperf], tmp_path / "t.tq")}
    assert results["vllm-bench"].rows["requests"] == 12 and results["vllm-bench"].quarantined == 0
    assert results["aiperf"].rows["requests"] == 100 and results["aiperf"].quarantined == 0
    entry = next(s for s in Dataset(tmp_path / "t.tq").sources() if s["format"] == "vllm-bench")
    assert entry["unrecognised"] == {
        "key a_key_from_a_future_version": 1,
        "key per_request_new_list": 1,
    }


def test_garbage_lines_in_jsonl(tmp_path: Path) -> None:
    lines = AIPERF.read_text().splitlines()
    lines.insert(5, "this is not json")
    lines.insert(50, lines[49][: len(lines[49]) // 2])  # a cut-off line
    lines.insert(60, "[1, 2, 3]")
    path = tmp_path / "profile_export.jsonl"
    path.write_text("\n".join(lines) + "\n")
    [result] = ingest([path], tmp_path / "t.tq")
    assert result.rows["requests"] == 100 and result.quarantined == 3
    reasons = table(tmp_path / "t.tq", "quarantine").sort("location")["reason"].to_list()
    assert any(r.startswith("truncated JSON line") for r in reasons)
    assert "not a JSON object" in reasons


def test_other_families_json_is_not_claimed(tmp_path: Path) -> None:
    otlp = tmp_path / "spans.json"
    otlp.write_text(json.dumps({"resourceSpans": [], "ttft_s": 1, "benchmarks": []}))
    jaeger = tmp_path / "jaeger.json"
    jaeger.write_text(json.dumps({"data": [{"traceID": "ab", "spans": [], "ttfts": []}]}))
    assert sniff(Source(otlp)) is None and sniff(Source(jaeger)) is None
    plain = tmp_path / "other.json"
    plain.write_text(json.dumps([{"a": 1}]))
    with pytest.raises(InputError, match="unrecognised format"):
        ingest([plain], tmp_path / "t.tq")


@pytest.mark.parametrize(
    "name",
    [
        "inference_perf_generated/console_stdout.log",  # `[transformers] …`, then its config
        "inference_perf_generated/config.yaml",  # `api:\\n`: a length prefix and a 0x0a tag
        "aiperf_generated/profile_export_console.txt",  # starts with a blank line
    ],
)
def test_a_tools_console_and_config_beside_its_export_are_not_read(
    name: str, tmp_path: Path
) -> None:
    """A results folder holds the tool's console output and config beside its exports: named,
    each is an unrecognised format (not an export, or protobuf, with no rows); in a folder
    each is listed as unrecognised."""
    path = REAL / name
    with pytest.raises(InputError, match="unrecognised format"):
        ingest([path], tmp_path / "named.tq")
    folder = tmp_path / "results"
    folder.mkdir()
    shutil.copy(path, folder / path.name)
    (result,) = ingest([folder], tmp_path / "folder.tq")
    assert (result.status, result.format, result.rows) == ("unrecognised", None, {})


def test_empty_and_wrong_types_do_not_crash(tmp_path: Path) -> None:
    shutil.copy(LLMPERF, tmp_path / "a_individual_responses.json")
    odd = tmp_path / "b_individual_responses.json"
    odd.write_text(json.dumps([{"ttft_s": "fast", "end_to_end_latency_s": [1]}, 3, None]))
    results = ingest([tmp_path / "a_individual_responses.json", odd], tmp_path / "t.tq")
    assert results[0].rows["requests"] == 150
    assert results[1].rows.get("requests", 0) == 0 and results[1].quarantined == 3


def test_aiperf_lines_across_many_small_blocks(tmp_path: Path, monkeypatch) -> None:
    """The JSON lines are streamed in blocks; a bad line in a later block is still found."""
    from traceq.ingest.loadtest import ndjson

    monkeypatch.setattr(ndjson, "BLOCK_BYTES", 4096)
    lines = AIPERF.read_text().splitlines()
    lines[80] = lines[80].replace('"ttft":{"value":', '"ttft":{"value":-', 1)
    path = tmp_path / "profile_export.jsonl"
    path.write_text("\n".join(lines))  # no final newline
    [result] = ingest([path], tmp_path / "t.tq")
    assert result.rows["requests"] == 99 and result.quarantined == 1
    q = table(tmp_path / "t.tq", "quarantine").row(0, named=True)
    assert q["location"] == "line 81" and q["raw"].startswith('{"metadata"')
    assert table(tmp_path / "t.tq", "tokens").height == result.rows["tokens"] > 20000


def test_guidellm_errored_old_style_and_unordered_requests(tmp_path: Path) -> None:
    with gzip.open(REAL / "guidellm_generated" / "benchmarks.json.gz") as fh:
        doc = json.load(fh)
    groups = doc["benchmarks"][0]["requests"]
    ok = groups["successful"]
    errored = ok.pop(0)
    errored["info"]["error"] = "ReadTimeout: no response in 30 s"
    groups["errored"] = [errored]
    old = ok[0]  # an older guidellm: flat times, no info.timings
    timings = old.pop("info")["timings"]
    old |= {
        "start_time": timings["request_start"],
        "first_token_time": timings["first_token_iteration"],
        "last_token_time": timings["last_token_iteration"],
    }
    ok[1]["info"]["timings"]["last_token_iteration"] = 0.0  # before its first token
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(doc))
    ds = tmp_path / "t.tq"
    [result] = ingest([path], ds)
    assert result.rows["requests"] == 49 and result.quarantined == 1
    rows = table(ds, "requests")
    assert rows.filter(pl.col("error").is_not_null())["error"].to_list() == [
        "ReadTimeout: no response in 30 s"
    ]
    flat = rows.filter(pl.col("request_id") == old["response_id"]).row(0, named=True)
    assert flat["t_arrival"] == round(timings["request_start"] * 1e9)
    assert flat["t_last_token"] == round(timings["last_token_iteration"] * 1e9)
    assert table(ds, "quarantine")["location"].to_list() == ["benchmark 0 successful 1"]


def _genai_doc() -> dict:
    with gzip.open(REAL / "genai_perf_generated" / "profile_export.json.gz") as fh:
        return json.load(fh)


def test_genai_perf_usage_role_and_glued_events(tmp_path: Path) -> None:
    """A chat stream: a role chunk (no content), two events glued in one read, and a usage
    chunk before [DONE]; output_tokens come from the usage chunk."""
    doc = _genai_doc()
    req = doc["experiments"][0]["requests"][0]
    t = req["timestamp"]

    def sse(payload: dict) -> str:
        return "data: " + json.dumps(payload) + "\n\n"

    def delta(content: dict) -> dict:
        return {"id": "chatcmpl-x1", "model": "m", "choices": [{"index": 0, "delta": content}]}

    usage = {
        "id": "chatcmpl-x1",
        "choices": [],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3},
    }
    req["response_timestamps"] = [t + 10, t + 20, t + 30, t + 40]
    req["response_outputs"] = [
        {"response": sse(delta({"role": "assistant", "content": ""}))},
        {"response": sse(delta({"content": "a"})) + sse(delta({"content": " b"}))},
        {"response": sse(delta({"content": " c"}))},
        {"response": sse(usage) + "data: [DONE]\n\n"},
    ]
    path = tmp_path / "profile_export.json"
    path.write_text(json.dumps(doc))
    ds = tmp_path / "t.tq"
    [result] = ingest([path], ds)
    assert result.quarantined == 0
    row = table(ds, "requests").filter(pl.col("request_id") == "chatcmpl-x1").row(0, named=True)
    assert (row["t_first_token"], row["t_last_token"]) == (t + 20, t + 30)
    assert (row["output_tokens"], row["prompt_tokens"]) == (3, 7)
    tokens = table(ds, "tokens").filter(pl.col("request_id") == "chatcmpl-x1").sort("idx")
    assert tokens.select("ts", "n_tokens").rows() == [(t + 20, 2), (t + 30, 1)]


def test_genai_perf_steady_clock_is_marked_and_anchored(tmp_path: Path) -> None:
    doc = _genai_doc()
    shift = 1_795_997_000_000_000_000  # make the stamps look like a steady clock (≈ 10 min)
    for req in doc["experiments"][0]["requests"]:
        req["timestamp"] -= shift
        req["response_timestamps"] = [ts - shift for ts in req["response_timestamps"]]
    path = tmp_path / "profile_export.json"
    path.write_text(json.dumps(doc))
    [plain] = ingest([path], tmp_path / "a.tq")
    assert plain.quarantined == 0
    assert Dataset(tmp_path / "a.tq").sources()[0]["clock_domain"] == "steady_clock_ns"
    t0 = 1_800_000_000_000_000_000
    ingest([path], tmp_path / "b.tq", options=IngestOptions(t0=t0))
    a, b = table(tmp_path / "a.tq", "requests"), table(tmp_path / "b.tq", "requests")
    assert b["t_arrival"].min() == t0
    assert (b["t_first_token"] - b["t_arrival"]).to_list() == (
        a["t_first_token"] - a["t_arrival"]
    ).to_list()
    tok_a, tok_b = table(tmp_path / "a.tq", "tokens"), table(tmp_path / "b.tq", "tokens")
    assert tok_b["ts"].min() - t0 == tok_a["ts"].min() - a["t_arrival"].min()  # type: ignore[operator]


def test_inference_perf_error_record_and_nan_chunk(tmp_path: Path) -> None:
    with gzip.open(
        REAL / "inference_perf_generated" / "per_request_lifecycle_metrics.json.gz"
    ) as fh:
        records = json.load(fh)
    records[2]["error"] = {"error_type": "ClientResponseError", "error_msg": "503 overloaded"}
    records[5]["info"]["response_metrics"]["chunk_times"][3] = float("nan")
    path = tmp_path / "per_request_lifecycle_metrics.json"
    path.write_text(json.dumps(records))  # Python's json writes NaN
    ds = tmp_path / "t.tq"
    [result] = ingest([path], ds)
    assert result.rows["requests"] == 53 and result.quarantined == 1
    assert table(ds, "quarantine")["location"].to_list() == ["record 5"]
    failed = table(ds, "requests").filter(pl.col("error").is_not_null()).row(0, named=True)
    assert json.loads(failed["error"]) == records[2]["error"]
    assert failed["t_first_token"] is None and failed["t_arrival"] is not None


def test_llmperf_error_rows_keep_code_and_message(tmp_path: Path) -> None:
    records = json.loads(LLMPERF.read_text())
    records[7] |= {"error_code": -100, "error_msg": "Timeout", "ttft_s": 0, "GEN_TEXT": "x" * 99}
    path = tmp_path / "e_individual_responses.json"
    path.write_text(json.dumps(records))
    ds = tmp_path / "t.tq"
    [result] = ingest([path], ds)
    assert result.rows["requests"] == 150 and result.quarantined == 0
    errors = table(ds, "requests").filter(pl.col("error").is_not_null())
    assert errors["error"].to_list() == ["-100 Timeout"]
    assert errors["t_first_token"].to_list() == [None]


def test_guidellm_sweep_runs_are_crosswalked_separately(tmp_path: Path) -> None:
    with gzip.open(REAL / "guidellm_generated" / "benchmarks.json.gz") as fh:
        doc = json.load(fh)
    second = json.loads(json.dumps(doc["benchmarks"][0]))
    for req in second["requests"]["successful"]:
        req["response_id"] += "-b"
        req["info"]["timings"]["first_token_iteration"] += 0.010  # 10 ms slower TTFT
    ttft = second["metrics"]["time_to_first_token_ms"]["successful"]
    ttft["mean"] += 10.0
    doc["benchmarks"].append(second)
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(doc))
    ds = tmp_path / "t.tq"
    [result] = ingest([path], ds)
    assert result.rows["requests"] == 100
    con = traceq.open(ds)
    cw = pl.from_arrow(
        con.sql(
            "SELECT run, native_ms, ours_ms, diff_ms FROM crosswalk "
            "WHERE native_metric = 'time_to_first_token_ms' AND statistic = 'mean' ORDER BY run"
        ).to_arrow_table()
    )
    assert cw["run"].to_list() == ["0", "1"]  # type: ignore[index]
    assert cw["ours_ms"][1] - cw["ours_ms"][0] == pytest.approx(10.0, abs=1e-3)  # type: ignore[index]
    assert (cw["diff_ms"].abs() < 1e-3).all()  # type: ignore[index]
