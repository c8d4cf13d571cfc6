"""`traceq report` on files real load-test tools wrote (tests/data/real/loadtest): the report's
percentiles are AIPerf's own figures, and a run without token timings (llmperf) still gives a
report and a baseline, with TBT marked n/a."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from traceq.cli import cli
from traceq.ingest import ingest
from traceq.report import build_report
from traceq.session import Session

REAL = Path(__file__).resolve().parent / "data" / "real" / "loadtest"
# AIPerf's names (its JSON export) for the report's KPIs; docs/METRICS.md crosswalk
AIPERF = {"time_to_first_token": "ttft", "inter_token_latency": "tpot",
          "inter_chunk_latency": "tbt", "request_latency": "e2e"}  # fmt: skip


@pytest.fixture(scope="module")
def aiperf(tmp_path_factory):
    ds = tmp_path_factory.mktemp("real") / "aiperf.tq"
    ingest([REAL / "aiperf_generated"], ds)
    return ds


def test_report_percentiles_are_aiperfs_own(aiperf):
    report = build_report(aiperf, findings=False)
    with Session(aiperf) as s:
        native = s.query(
            "SELECT metric, statistic, value FROM tool_metrics WHERE tool = 'aiperf' "
            "AND statistic IN ('p50', 'p90', 'p95', 'p99') AND metric IN "
            "('time_to_first_token', 'inter_token_latency', 'inter_chunk_latency', "
            "'request_latency') AND unit = 'ms'"
        )
    assert native.height >= 12
    for metric, stat, value in native.iter_rows():
        ours = report.measurement.values[f"{AIPERF[metric]}_{stat}_ms"]
        assert ours == pytest.approx(value, abs=1e-3), (metric, stat)


def test_run_without_token_timings(tmp_path):
    ds = tmp_path / "llmperf.tq"
    ingest([REAL / "llmperf"], ds)
    runner = CliRunner()
    base = tmp_path / "b.json"
    r = runner.invoke(cli, ["report", str(ds), "--no-findings", "-o", str(tmp_path / "r.html"),
                            "--save-baseline", str(base)])  # fmt: skip
    assert r.exit_code == 0, r.output
    r = runner.invoke(cli, ["report", str(ds), "--no-findings", "--baseline", str(base),
                            "--fail-on-regression"])  # fmt: skip
    assert r.exit_code == 0, r.output
    report = build_report(ds, baseline=base, findings=False)
    verdicts = {c.kpi: c.verdict for c in report.changes}
    assert verdicts["tbt_p95_ms"] == "n/a"  # llmperf records no chunk times
    assert verdicts["ttft_p95_ms"] == "unchanged"
    assert report.measurement.context["requests"] == 150


def test_a_server_log_without_token_counts_leaves_unknown_kpis_out(tmp_path):
    """vLLM 0.6.3's request logging gives each request's arrival and end, not its tokens or
    first token: the token throughput and SLO attainment are unknown, not 0 (the TTFT SLO can
    judge no request), and the profile leaves the output tokens out."""
    log = REAL.parent / "vllm"
    log /= "vllm_v0_0.6.3post1_pp4_request_logging_received_added_finished_uvicorn_mapcoder.log"
    ds = tmp_path / "log.tq"
    ingest([log], ds)
    report = build_report(ds, findings=False, headroom=False)
    values = report.measurement.values
    assert report.measurement.context["requests"] == 41 and values["e2e_p95_ms"] is not None
    assert values["output_tokens_per_s"] is None
    assert values["slo_attainment"] is None and values["goodput_rps"] is None
    md = tmp_path / "r.md"
    r = CliRunner().invoke(
        cli, ["report", str(ds), "--no-findings", "--no-headroom", "-o", str(md)]
    )
    assert r.exit_code == 0, r.output
    assert "SLO attainment" in r.output and "0.00 %" not in r.output.split("Error rate")[0]
    assert "prompt tokens;" in md.read_text() and "0 output tokens" not in md.read_text()
    # no GPU sample and no --gpus: the cost's one GPU is said to be assumed
    assert "; 1 GPU assumed (no GPU samples; --gpus sets the count), " in md.read_text()


def test_times_from_the_runs_own_start_read_as_such(tmp_path):
    """llmperf stamps requests from its own start, not the epoch: the report and the
    incidents say `00:00:00 into the run`, never a date in 1970."""
    ds = tmp_path / "llmperf.tq"
    ingest([REAL / "llmperf"], ds)
    md = tmp_path / "r.md"
    r = CliRunner().invoke(cli, ["report", str(ds), "--no-headroom", "-o", str(md)])
    assert r.exit_code == 0, r.output
    text = md.read_text()
    assert "00:00:00 → 00:00:03 into the run (3.6 s)" in text
    assert "into the run for" in text and "1970" not in text
    # llmperf does not say whether it streamed: the undecided cause names that input
    assert "needs whether each request was streamed" in text
    assert "data for this check" not in text


@pytest.mark.parametrize(
    ("files", "says"),
    [
        ("vllm_bench", "the summary of vllm-bench (91 figures in tool_metrics) but no request, "
         "and a report needs each request's times: rerun vllm bench serve with --save-detailed"),
        ("inference_perf_kubecon", "set report.request_lifecycle.per_request: true"),
    ],
)  # fmt: skip
def test_a_summary_only_export_is_refused_with_what_would_report(tmp_path, files, says):
    """Load tools that wrote only their summary (`vllm bench serve` without --save-detailed,
    inference-perf without its per-request report): the refusal says what the dataset holds
    and how to record each request."""
    ds = tmp_path / "summary.tq"
    ingest([REAL / files], ds)
    out = CliRunner().invoke(cli, ["report", str(ds), "-o", str(tmp_path / "r.md")])
    assert out.exit_code == 2
    assert "has no requests: nothing to report; it holds " in out.output
    assert says in out.output and "Traceback" not in out.output
