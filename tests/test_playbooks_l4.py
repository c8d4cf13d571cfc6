"""The L4 profile (traceq/synth/hardware.py): a KV-pressure run there is one incident.

On an L4 a step lasts ~0.5 s, so a cache that preemption keeps emptying and refilling reads
80-85 % in the 10-s stats lines while requests wait, and a 1 k-token prompt admitted into
the full cache takes seconds from scheduling to first token (recompute). Both are
kv-pressure's consequences, checked by its `explains:` edges' KV-bound mechanism
(traceq/playbooks/catalog/kv-pressure.yaml), not false leads of their own."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import traceq
from tests.playbook_helpers import failing, found, ingest_folder, run
from traceq.hardware import lookup
from traceq.ingest import IngestOptions
from traceq.playbooks import Options, load_catalog
from traceq.playbooks.engine import diagnose
from traceq.playbooks.gpu import measured
from traceq.session import Session
from traceq.synth import generate


def test_kv_pressure_on_an_l4_explains_its_queue_and_stretched_prefills(tmp_path):
    folder = tmp_path / "kv-l4"
    generate("kv-pressure", folder, seed=13, requests=200, intensity="medium", hardware="l4-8b")
    d = run(ingest_folder(folder, tmp_path / "kv-l4.tq"))
    assert set(failing(d)) == {"kv-pressure"}
    seen = found(d)
    assert seen["ttft-prefill"].see == "kv-pressure"
    assert seen["ttft-queueing"].see == "kv-pressure"


def test_whole_prompt_stalls_on_an_l4_are_measured_against_chunked_prefills_step(tmp_path):
    """With chunked prefill off and no budget printed, the L4's stall line is the step of
    vLLM's 2,048-token default budget there (~0.6 s), not of the H100's 8,192 (~2 s, which
    a 12 k-token prompt's 2.8 s prefill barely passed): the stalls behind whole prompts are
    the incident, and chunked prefill its cause."""
    folder = tmp_path / "pi-l4"
    generate("prefill-interference", folder, seed=5, intensity="medium", hardware="l4-8b")
    d = run(ingest_folder(folder, tmp_path / "pi-l4.tq"))
    assert set(failing(d)) == {"prefill-interference"}
    finding = found(d)["prefill-interference"]
    assert finding.params["stall_ms"] == 590.0
    assert finding.causes[0].id == "chunked-prefill-off"
    assert "stall_ms 590 ms, 2.4× the floor" in finding.message
    # the same run's traces and GPU samples without the server log: no start-up says
    # anything, and vLLM's default for the GPU stands (not the H100's 8,192-token step)
    traces = tmp_path / "pi-l4-traces.tq"
    traceq.ingest([folder / "traces.otlp.jsonl", folder / "nvidia-smi.csv"], traces)
    finding = found(run(traces))["prefill-interference"]
    assert finding.status == "fail" and finding.params["stall_ms"] == 590.0
    # a floor given with --param is said to be given, not the GPU's scale of the default
    with Session(traces) as session:
        given = Options(overrides={"prefill-interference": {"stall_ms": 400}})
        pb = [p for p in load_catalog().playbooks if p.id == "prefill-interference"]
        (finding,) = diagnose(session, pb, given).findings
    assert "(stall_ms 400 ms as given)" in finding.message and "×" not in finding.message


def test_the_engine_config_wins_over_the_arguments_in_the_same_second(tmp_path):
    """Asked for chunked prefill, a V0 engine turned it off (an unsupported model): the
    config line, printed after the arguments in the same second, is the value in effect."""
    log = tmp_path / "v0.log"
    log.write_text(
        "INFO 09-06 03:00:00 api_server.py:529] vLLM API server version 0.6.3\n"
        "INFO 09-06 03:00:00 api_server.py:529] args: Namespace(model='m', "
        "enable_chunked_prefill=True, tensor_parallel_size=1)\n"
        "INFO 09-06 03:00:00 llm_engine.py:237] Initializing an LLM engine (v0.6.3) with "
        "config: model='m', max_seq_len=8192, chunked_prefill_enabled=False\n"
    )
    traceq.ingest([log], tmp_path / "v0.tq", options=IngestOptions(year=2025))
    with Session(tmp_path / "v0.tq") as session:
        assert measured(session).chunked is False


REAL_VLLM = Path(__file__).parent / "data" / "real" / "vllm"


@pytest.mark.parametrize(
    ("log", "chunked", "budget"),
    [
        # the config line's `enable_chunked_prefill=` lies past the 1,000 characters of it
        # that `events.message` keeps
        ("vllm_v1_0.11.2_full_startup_and_bench_conc1_4_8_llama3_8b_faradawn.log", True, 8192),
        (
            "vllm_v1_0.11.0_t4_sm75_embedding_startup_benign_fa2_error_xformers_fallback_zjpzhao.log",
            False,
            8192,
        ),
        ("vllm_v0_0.4.1_startup_llama3_8b_3090_gpu_blocks_cudagraph_zhjunqin.log", False, None),
    ],
)
def test_chunked_prefill_state_of_a_real_log_reaches_the_stall_floors(
    tmp_path, log, chunked, budget
):
    traceq.ingest([REAL_VLLM / log], tmp_path / "real.tq")
    with Session(tmp_path / "real.tq") as session:
        hw = measured(session)
    assert (hw.chunked, hw.budget) == (chunked, budget)
    on_l4 = replace(hw, spec=lookup("NVIDIA L4"), seen="NVIDIA L4", weights_gib=15.0)  # an 8B
    # chunked prefill off: the L4's stall line is the step of its 2,048-token default, not
    # of the printed 8,192 (a whole prompt in one step is what prefill-interference finds)
    assert round(on_l4.scale("step_time"), 1) == (8.3 if chunked else 2.4)


def test_traces_without_a_gpu_name_say_the_floors_assumed_an_h100_and_gpu_names_it(tmp_path):
    """A disaggregated L4 deployment's traces name no GPU (no nvidia-smi, no log): the
    H100's floors make a healthy L4's 300-ms prefills and 0.5-s steps look like incidents,
    and the output says which floors assumed it. Named with `--gpu l4`, the floors are the
    L4's and the one incident is the gateway's failures (1 request in 16, 4 of 60 over 13
    minutes: never two a minute, counted over a hundred requests); the finding says the GPU
    was named, not measured."""
    from click.testing import CliRunner

    from traceq.app import data
    from traceq.cli import cli
    from traceq.cli.common import checked_gpu
    from traceq.findings import Diagnosis
    from traceq.playbooks.render import render_text
    from traceq.report.incidents import view
    from traceq.report.render_md import incidents_md

    folder = tmp_path / "dynamo-l4"
    generate("healthy", folder, seed=5, convention="dynamo", hardware="l4-8b")
    ds = tmp_path / "dynamo-l4.tq"
    traceq.ingest([folder / "traces.otlp.jsonl"], ds)
    runner = CliRunner()
    assumed = runner.invoke(cli, ["diagnose", str(ds), "--format", "json"])
    assert assumed.exit_code == 1, assumed.output
    d = Diagnosis.from_dict(json.loads(assumed.output))
    line = (
        "floors assumed an H100 SXM5 80GB in tbt-jitter, ttft-prefill: the data names no GPU; "
        "name it with --gpu"
    )
    assert line in render_text(d)
    # the report and the app show the diagnosis the same way
    assert "F" + line[1:] in "\n".join(incidents_md(view(d)))
    named = runner.invoke(cli, ["diagnose", str(ds), "--gpu", "l4", "--format", "json"])
    doc = json.loads(named.output)
    assert [i["root"] for i in doc["incidents"]] == ["error-rate"]
    findings = {f["id"]: f for f in doc["findings"]}
    assert findings["error-rate"]["causes"][0]["id"] == "not-served"
    prefill = findings["ttft-prefill"]
    assert prefill["status"] == "pass" and prefill["gpu"]["source"] == "named"
    assert prefill["gpu"]["gpu"] == "L4 24GB" and prefill["params"]["min_prefill_ms"] > 1000
    # the app (`traceq app --gpu`) and the report take it to their playbooks
    app = data.findings_for(str(ds), gpu="l4").view
    assert app.assumed_gpu == "" and [b.root.id for b in app.blocks] == ["error-rate"]
    out = tmp_path / "r.json"
    report = runner.invoke(cli, ["report", str(ds), "-o", str(out), "--no-headroom", "--gpu", "L4"])
    assert report.exit_code == 0, report.output
    saved = json.loads(out.read_text())
    assert saved["params"]["gpu"] == "L4" and saved["assumed_gpu"] == ""
    assert [i["root"] for i in saved["incidents"]] == ["error-rate"]
    # the config's [diagnose] gpu goes through the same check as --gpu
    assert checked_gpu(None, "NVIDIA L4") == "NVIDIA L4" and checked_gpu(None) is None


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("A100", "GPU 'A100' is ambiguous or unknown: name one of a100-pcie-40gb, a100-sxm4-40gb"),
        ("Quadro P400", "GPU 'Quadro P400' is not in the table: name one of a100-pcie-40gb"),
    ],
)
def test_a_gpu_name_the_table_lacks_is_refused_with_the_rows_it_could_mean(tmp_path, name, says):
    from click.testing import CliRunner

    from traceq.cli import cli

    for command in ("diagnose", "report", "app"):
        result = CliRunner().invoke(cli, [command, str(tmp_path), "--gpu", name])
        assert result.exit_code == 2, (command, result.output)
        assert f"traceq: error: --gpu: {says}" in result.output


def test_slow_steps_from_the_second_window_of_a_warm_up_are_its_consequence(tmp_path):
    """The diagnosis grid is aligned to round times and the run's first window held its
    first 4 s; the slow decode the warm-up causes is first seen in the window after it, 4 s
    into the run, and is still the warm-up's consequence (slow-decode's `warm-up` cause), not
    an incident of its own."""
    folder = tmp_path / "warm-l4"
    generate("warm-up-skew", folder, seed=5, convention="dynamo", hardware="l4-8b")
    ds = tmp_path / "warm-l4.tq"
    traceq.ingest([folder / "traces.otlp.jsonl"], ds)
    with Session(ds) as session:
        d = diagnose(session, load_catalog().playbooks, Options(gpu="l4"))
    # the other incident is the gateway's failures (1 request in 16)
    assert sorted(i.root for i in d.incidents) == ["error-rate", "warm-up-skew"]
    slow = found(d)["slow-decode"]
    assert slow.see == "warm-up-skew" and slow.windows[0]["start_at"] == "2025-06-15T10:00:04Z"


def test_long_prompts_at_the_start_are_prefill_interference_not_a_warm_up(tmp_path):
    """Chunked prefill off on an L4, traffic opening with a 4 k- and a 15 k-token prompt and
    a 128-token one queued behind them: the first block's median TTFT is 6× the steady
    state's on a warm engine. Requests held by a long prefill do not judge warm-up-skew's
    TTFT, and the window whose 409-token prompts took 3 s to prefill beside a 9.5 k one is
    prefill-interference's consequence: one incident of the fault, not three."""
    folder = tmp_path / "pi-l4"
    generate("prefill-interference", folder, seed=6, hardware="l4-8b")
    d = run(ingest_folder(folder, tmp_path / "pi-l4.tq"))
    by_id = {f.id: f for f in d.findings}
    assert by_id["warm-up-skew"].status == "pass", by_id["warm-up-skew"].message
    assert (by_id["ttft-prefill"].status, by_id["ttft-prefill"].see) == (
        "warn",
        "prefill-interference",
    )
    assert d.incidents[0].root == "prefill-interference"
