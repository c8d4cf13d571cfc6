"""Generated scenarios ingested through the public ingester reproduce the simulator's truth
exactly (OTLP), the same seed writes the same bytes, and the committed sample_traces/ are
what `make sample-traces` writes."""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

import orjson
import polars as pl
import pytest
from click.testing import CliRunner

import traceq
from traceq.cli import cli
from traceq.synth import FILES, generate, scenario
from traceq.synth.sim import Collect, simulate

ROOT = Path(__file__).resolve().parent.parent


def truth_phases(name: str, seed: int, **kw: object) -> pl.DataFrame:
    """The simulator's own per-request phases (docs/METRICS.md), from its stamps."""
    sink = Collect()
    simulate(scenario(name, **kw), seed, [sink])  # type: ignore[arg-type]
    rows = []
    for r in sink.requests:
        last = r.tokens[-1] if r.tokens else r.t_end
        first = r.t_first_token
        row = {
            "request_id": r.request_id,
            "t_arrival": r.t_arrival,
            "tokenize_ns": r.t_tokenized - r.t_arrival,
            "ttft_ns": first - r.t_arrival if first else None,
            "e2e_ns": last - r.t_arrival,
            "decode_ns": last - first if first else None,
            "prompt_tokens": r.prompt,
            "output_tokens": len(r.tokens),
            "cached_tokens": r.cached or None,
            "error": r.error,
            "finish_reason": r.finish_reason,
        }
        if first:  # queue and prefill are exact whenever a first token exists
            row |= {
                "queue_ns": r.t_scheduled - r.t_queued,
                "prefill_ns": first - r.t_scheduled,
                "residual_ns": r.t_queued - r.t_tokenized,  # the API server → engine hand-off
            }
        rows.append(row)
    return pl.DataFrame(rows, infer_schema_length=None).sort("request_id")


CASES = [
    ("healthy", None),
    ("kv-pressure", None),
    ("errors", None),
    ("low-prefix-reuse", None),
    ("large", 400),
]  # large: shared prefixes with prefix caching on (cached tokens)


@pytest.mark.parametrize(("name", "requests"), CASES)
def test_otlp_ingest_reproduces_truth_exactly(tmp_path, name, requests):
    generate(name, tmp_path / "out", seed=5, requests=requests)
    traceq.ingest([tmp_path / "out" / FILES["otlp"]], tmp_path / "ds")
    con = traceq.open(tmp_path / "ds")
    want = truth_phases(name, 5, requests=requests)
    got = con.sql("SELECT * FROM request_phases").pl().sort("request_id")
    assert got["request_id"].to_list() == want["request_id"].to_list()
    for col in want.columns:
        w, g = want[col].to_list(), got[col].to_list()
        if col in ("queue_ns", "prefill_ns", "residual_ns"):
            mask = want["ttft_ns"].is_not_null().to_list()
            w = [x for x, m in zip(w, mask, strict=True) if m]
            g = [x for x, m in zip(g, mask, strict=True) if m]
        assert g == w, col
    # token_gaps: every token of every request, at its exact time.
    if name == "large":
        assert want["cached_tokens"].drop_nulls().len() > 100
    sink = Collect()
    simulate(scenario(name, requests=requests), 5, [sink])
    tokens = con.sql(
        "SELECT request_id, list(ts ORDER BY idx) AS ts, sum(n_tokens) AS n FROM token_gaps "
        "GROUP BY request_id"
    ).pl()
    got_tokens = {r["request_id"]: (r["ts"], r["n"]) for r in tokens.to_dicts()}
    for r in sink.requests:
        if r.tokens:
            assert got_tokens[r.request_id] == (r.tokens, len(r.tokens))
        else:
            assert r.request_id not in got_tokens
    assert con.sql("SELECT count(*) FROM quarantine").fetchall() == [(0,)]


def test_client_view_keeps_server_truth_and_adds_client_stalls(tmp_path):
    generate("client-jitter", tmp_path / "out", seed=2)
    out = tmp_path / "out"
    traceq.ingest([out / FILES["otlp"], out / FILES["client_otlp"]], tmp_path / "ds")
    con = traceq.open(tmp_path / "ds")
    views = dict(con.sql("SELECT view, count(*) FROM requests GROUP BY view").fetchall())
    assert views == {"server": 64, "client": 64}
    # request_phases prefers the server row; client gaps carry the stalls.
    assert con.sql("SELECT count(*) FROM request_phases WHERE view = 'server'").fetchall() == [
        (64,)
    ]
    # token_gaps reads the server rows; the client's own gaps are in client_token_gaps.
    big = con.sql(
        "SELECT 'server', count(*) FROM token_gaps WHERE tbt_ms > 100 UNION ALL "
        "SELECT 'client', count(*) FROM client_token_gaps WHERE tbt_ms > 100"
    ).fetchall()
    assert dict(big)["client"] > 10 and dict(big)["server"] == 0


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    for d in ("a", "b"):
        generate("kv-pressure", tmp_path / d, seed=11)
    generate("kv-pressure", tmp_path / "c", seed=12)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    assert (
        _digest(tmp_path / "a")["traces.otlp.jsonl"] != _digest(tmp_path / "c")["traces.otlp.jsonl"]
    )


def test_committed_sample_traces_regenerate_bit_for_bit(tmp_path):
    from traceq.synth.samples import SAMPLE_FOLDERS, regenerate

    regenerate(tmp_path)
    committed = ROOT / "sample_traces"
    assert sorted(p.name for p in committed.iterdir() if p.is_dir()) == sorted(SAMPLE_FOLDERS)
    for name in SAMPLE_FOLDERS:
        assert _digest(committed / name) == _digest(tmp_path / name), name
    total = sum(p.stat().st_size for p in committed.rglob("*") if p.is_file())
    assert total <= 20 << 20


def test_labels_name_faults_windows_and_playbooks(tmp_path):
    labels = generate("queue-overload", tmp_path, seed=1)
    on_disk = orjson.loads((tmp_path / "labels.json").read_bytes())
    assert on_disk["scenario"] == "queue-overload"
    assert on_disk["expected_playbooks"] == ["ttft-queueing"]
    assert on_disk["intensity"] == "strong" and on_disk["window"] is None
    assert on_disk["expected_causes"] == {"ttft-queueing": ["arrival-burst", "concurrency-cap"]}
    (fault,) = on_disk["faults"]
    assert fault["fault"] == "queue-overload"
    assert fault["causes"] == {"ttft-queueing": ["arrival-burst", "concurrency-cap"]}
    ((lo, hi),) = ((w["start"], w["end"]) for w in fault["windows"])
    clock = on_disk["clock"]
    assert (
        clock["first_arrival_ns"] < lo < hi < clock["first_arrival_ns"] + clock["arrival_span_ns"]
    )
    # The window is where arrivals really come 15x faster: its gaps are a fraction of the rest.
    arrivals = sorted(
        int(span["startTimeUnixNano"])
        for line in (tmp_path / "traces.otlp.jsonl").read_bytes().splitlines()
        for rs in orjson.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
        if span["name"] == "llm_request"
    )
    inside = [b - a for a, b in itertools.pairwise(arrivals) if lo <= a < hi]
    outside = [b - a for a, b in itertools.pairwise(arrivals) if not lo <= a <= hi]
    assert len(inside) >= 10
    assert sum(inside) / len(inside) < sum(outside) / len(outside) / 5
    assert labels["truth"]["requests"] == 84
    healthy = orjson.loads((ROOT / "sample_traces" / "healthy" / "labels.json").read_bytes())
    assert healthy["faults"] == [] and healthy["expected_playbooks"] == []
    assert healthy["intensity"] is None


def test_cli_synth_and_demo(tmp_path, demo_run):
    runner = CliRunner()
    res = runner.invoke(
        cli, ["synth", "fixed-length", "-o", str(tmp_path / "s"), "--requests", "12", "--seed", "3"]
    )
    assert res.exit_code == 0, res.output
    assert "12 requests, 1,536 output tokens" in res.output
    assert (tmp_path / "s" / "vllm.log").is_file()
    res = runner.invoke(cli, ["synth", "nope", "-o", str(tmp_path / "x")])
    assert res.exit_code == 2
    res = runner.invoke(cli, ["synth", "list", "-o", str(tmp_path / "x")])
    assert "kv-pressure" in res.output
    # `traceq demo -o DIR`, run once per session (tests/conftest.py; test_cli.py reads it too)
    assert demo_run.result.returncode == 0, demo_run.result.stderr
    out = demo_run.result.stdout
    assert "| kv-pressure" in out and "TTFT p99" in out
    assert (demo_run.out / "healthy.tq" / "manifest.json").is_file()
