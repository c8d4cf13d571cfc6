"""`traceq diagnose / explain / playbooks` as a user runs them: formats, exit codes, lint."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.playbook_helpers import ROOT, SAMPLES, ingest_folder
from traceq.cli import cli
from traceq.playbooks import builtin_dir, load_catalog


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), standalone_mode=True)


@pytest.fixture(scope="module")
def kv(tmp_path_factory):
    return ingest_folder(SAMPLES / "kv-pressure", tmp_path_factory.mktemp("kv") / "kv.tq")


def test_diagnose_text_fails_with_exit_1_and_names_the_window(kv):
    r = invoke("diagnose", str(kv))
    assert r.exit_code == 1, r.output
    lines = r.output.splitlines()
    assert lines[0].startswith("INCIDENT 1 [critical] KV-cache pressure"), lines[0]
    assert "from 2025-06-15 10:00" in lines[0]
    assert any(x.startswith("  └ WARN ttft-queueing (see kv-pressure)") for x in lines)
    assert lines[-1].startswith("1 incident; 15 playbooks on")


def test_diagnose_json_is_the_findings_plus_run_metadata(kv):
    r = invoke("diagnose", str(kv), "--format", "json", "--only", "kv-pressure,error-rate")
    data = json.loads(r.output)
    assert {"findings", "dataset", "dataset_hash", "traceq_version", "started_at"} <= set(data)
    by_id = {f["id"]: f for f in data["findings"]}
    assert set(by_id) == {"kv-pressure", "error-rate"}
    kvf = by_id["kv-pressure"]
    assert kvf["status"] == "fail" and kvf["windows"][0]["start"] < kvf["windows"][0]["end"]
    assert kvf["params"] == {"kv_full": 0.95, "min_preemptions": 1}
    assert kvf["dataset_hash"] == data["dataset_hash"]


def test_fail_on_threshold_and_params_and_config(kv, tmp_path):
    assert invoke("diagnose", str(kv), "--fail-on", "critical").exit_code == 1
    assert invoke("diagnose", str(kv), "--only", "ttft-queueing").exit_code == 1
    r = invoke("diagnose", str(kv), "--only", "ttft-queueing",
               "--param", "ttft-queueing.min_ttft_ms=1000000")  # fmt: skip
    assert r.exit_code == 0, r.output  # a stricter threshold: nothing fires
    config = tmp_path / "traceq.toml"
    config.write_text('[diagnose]\nfail_on = "critical"\nformat = "markdown"\n')
    r = invoke("diagnose", str(kv), "--config", str(config))  # the KV incident is critical
    assert r.exit_code == 1 and r.output.startswith("# traceq diagnose")
    r = invoke("diagnose", str(kv), "--config", str(config), "--only", "tbt-jitter,warm-up-skew")
    assert r.exit_code == 0, r.output  # nothing critical among these


@pytest.mark.parametrize(
    "args",
    [
        ("--param", "kv-pressure.nope=1"),
        ("--param", "no-such.kv_full=1"),
        ("--param", "novalue"),
        ("--only", "no-such-playbook"),
    ],
)
def test_usage_errors_exit_2(kv, args):
    assert invoke("diagnose", str(kv), *args).exit_code == 2


def test_an_override_outside_the_parameters_bounds_is_a_one_line_error(kv, tmp_path):
    # a stall floor under 100 ms would silently undercount: gap_stalls keeps gaps from 100 ms
    r = invoke("diagnose", str(kv), "--param", "tbt-jitter.stall_floor_ms=50")
    assert r.exit_code == 2
    assert r.output.strip() == (
        "traceq: error: --param tbt-jitter.stall_floor_ms: must be at least 100 (ms), got 50"
    )
    config = tmp_path / "traceq.toml"
    config.write_text("[params.kv-pressure]\nkv_full = 1.5\n")
    r = invoke("diagnose", str(kv), "--config", str(config))
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    assert "kv_full: must be at most 1 (ratio 0-1), got 1.5" in r.output


def test_memory_limit_bounds_duckdb_and_a_bad_one_is_a_one_line_error(kv):
    # the DuckDB limit beyond which the rollups spill (docs/PERFORMANCE.md, "Diagnose")
    args = ("diagnose", str(kv), "--only", "kv-pressure,tbt-jitter", "--format", "json")
    r = invoke(*args, "--memory-limit", "256MB")
    assert r.exit_code == 1

    def findings(output: str) -> list[dict]:
        return [{**f, "elapsed_s": None} for f in json.loads(output)["findings"]]

    assert findings(r.output) == findings(invoke(*args).output)
    r = invoke(*args, "--memory-limit", "lots")
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    assert "Memory must have a number" in r.output


def test_missing_dataset_is_a_one_line_error(tmp_path):
    r = invoke("diagnose", str(tmp_path / "none.tq"))
    assert r.exit_code == 2 and "not a traceq dataset" in r.output


def test_explain_and_list():
    r = invoke("explain", "tbt-jitter")
    assert r.exit_code == 0
    for heading in ("## What it detects", "## Why it matters", "## Parameters", "## References"):
        assert heading in r.output
    assert "stall_floor_ms" in r.output and "seed part 1 §5.1" in r.output
    assert invoke("explain", "nope").exit_code == 2
    listed = invoke("playbooks", "list").output.splitlines()
    assert len(listed) == 15 and listed[0].startswith("engine-failure")


def test_lint_binds_every_query_against_the_real_views():
    r = invoke("playbooks", "lint")
    assert r.exit_code == 0, r.output
    assert "15 playbooks, 0 issues" in r.output


def test_lint_reports_an_unknown_column_with_file_and_field(tmp_path):
    text = Path(load_catalog().by_id()["tokenizer-overhead"].source).read_text()
    (tmp_path / "mine.yaml").write_text(text.replace("tokenize_p50_ms >=", "tokenise_p50 >="))
    r = invoke("playbooks", "lint", str(tmp_path))
    assert r.exit_code == 1
    assert re.search(r"mine\.yaml:\d+: symptom\.sql:", r.output) and "tokenise_p50" in r.output


def test_lint_reports_a_default_outside_the_parameters_bounds(tmp_path):
    text = Path(load_catalog().by_id()["tbt-jitter"].source).read_text()
    bad = text.replace("stall_floor_ms:\n    default: 250", "stall_floor_ms:\n    default: 50")
    (tmp_path / "mine.yaml").write_text(bad.replace("max: 1\n", "max: -1\n", 1))
    r = invoke("playbooks", "lint", str(tmp_path))
    assert r.exit_code == 1
    assert re.search(
        r"mine\.yaml:\d+: params\.stall_floor_ms\.default: must be at least 100 \(ms\), got 50",
        r.output,
    )
    assert re.search(r"mine\.yaml:\d+: params\.kv_full\.min: min 0 is above max -1", r.output)
    # the same file is refused by diagnose, not run with a wrong threshold
    r = invoke("diagnose", str(tmp_path / "none.tq"), "--playbooks", str(tmp_path))
    assert r.exit_code == 2 and "invalid playbooks" in r.output


def test_playbooks_ship_inside_the_package():
    assert builtin_dir().is_relative_to(ROOT / "traceq")
    assert (ROOT / "playbooks").resolve() == builtin_dir().resolve()
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = data["tool"]["setuptools"]["package-data"]["traceq"]
    assert "playbooks/catalog/*.yaml" in globs
    assert len(list(builtin_dir().glob("*.yaml"))) == 15


def test_catalogue_page_is_current():
    from traceq.playbooks import catalog_doc

    page = (ROOT / "docs" / "PLAYBOOKS.md").read_text()
    assert catalog_doc.render() in page, "run: python -m traceq.playbooks.catalog_doc"
