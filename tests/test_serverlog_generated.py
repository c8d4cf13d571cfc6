"""Generated V0 / V1 logs (tests/serverlog_factory.py) round-trip exactly; hard-wrapped,
coloured, block-split and compressed variants give the same rows; year and zone options."""

from __future__ import annotations

import datetime as dt
import gzip
import os
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from tests import serverlog_factory as f
from tests.playbook_helpers import REAL
from tests.serverlog_helpers import ingest_log, ns, rows
from traceq.cli import cli
from traceq.ingest import ingest
from traceq.ingest.serverlog import lines as ln
from traceq.ingest.serverlog.clock import Clock

T0 = dt.datetime(2025, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
STATS_COLUMNS = (
    "ts, engine, prompt_tps, gen_tps, running, waiting, swapped, kv_usage, cpu_kv_usage, "
    "prefix_hit_rate"
)


def scenario() -> tuple[list[str], list[tuple]]:
    """Log lines (V0 then V1 with request logging) and the engine_stats rows they hold."""
    v0 = f.random_stats(T0, 30, seed=1)
    v1 = f.random_stats(T0 + dt.timedelta(minutes=10), 30, seed=2, step_s=10)
    lines = [f.v0_stats(s) for s in v0]
    lines.append(f.preemption(v0[-1].at, "cmpl-pre-0", 51))
    for i, s in enumerate(v1):
        lines.append(f.v1_stats(s))
        if i % 3 == 0:
            req = f"cmpl-{i:032x}-0"
            lines.append(f.received(s.at, req, i + 1, 100 + i, True))
            lines.append(f.lifecycle(s.at, "Added", req, True))
            lines.append(f.access(200))
            end = s.at + dt.timedelta(seconds=7)
            lines.append(f.lifecycle(end, "Aborted" if i == 9 else "Finished", req, False))
    expect = [
        (ns_of(s.at), 0, s.prompt_tps, s.gen_tps, s.running, s.waiting, s.swapped,
         ratio(s.kv_pct), ratio(s.cpu_kv_pct), None)
        for s in v0
    ] + [
        (ns_of(s.at), s.engine, s.prompt_tps, s.gen_tps, s.running, s.waiting, None,
         ratio(s.kv_pct), None, ratio(s.prefix_pct))
        for s in v1
    ]  # fmt: skip
    return lines, expect


def ratio(pct: float) -> float:
    """The ratio a printed `%.1f%%` stands for (nearest double to the decimal / 100)."""
    return float(Decimal(f"{pct:.1f}") / 100)


def ns_of(at: dt.datetime) -> int:
    return int(at.timestamp()) * 1_000_000_000


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def stats(con) -> list[tuple]:
    return rows(con, f"SELECT {STATS_COLUMNS} FROM engine_stats ORDER BY line")


def test_round_trip(tmp_path: Path) -> None:
    lines, expect = scenario()
    con, entry = ingest_log(write(tmp_path / "gen.log", lines), tmp_path, year=2025)
    assert stats(con) == expect
    assert entry["quarantined"] == 0
    assert entry["unrecognised"] == {}
    pre = rows(con, "SELECT ts, value, request_id, severity FROM events WHERE kind = 'preemption'")
    assert pre == [(ns_of(T0 + dt.timedelta(seconds=145)), 51.0, "cmpl-pre-0", "WARNING")]
    req = rows(con, "SELECT request_id, t_arrival, t_queued, t_last_token, prompt_tokens, "
                    "max_tokens, finish_reason, error, time_resolution_ns FROM requests "
                    "ORDER BY t_arrival")  # fmt: skip
    assert len(req) == 10
    first = T0 + dt.timedelta(minutes=10)
    end = ns_of(first + dt.timedelta(seconds=7))
    assert req[0] == (
        f"cmpl-{0:032x}-0",
        ns_of(first),
        ns_of(first),
        end,
        1,
        100,
        None,
        None,
        1_000_000_000,
    )
    assert req[3][0] == f"cmpl-{9:032x}-0" and req[3][6:8] == ("abort", "aborted")
    assert rows(con, "SELECT count(*) FROM events WHERE kind = 'http' AND value = 200") == [(10,)]
    assert rows(con, "SELECT count(*) FROM events WHERE message LIKE '%SECRET PROMPT%'") == [(0,)]


@pytest.mark.parametrize("width", [97, 133])
def test_hard_wrapped_and_coloured(tmp_path: Path, width: int) -> None:
    lines, expect = scenario()
    wrapped = f.hard_wrap([f.colour(line) for line in lines], width)
    assert len(wrapped) > len(lines) + 50
    con, entry = ingest_log(write(tmp_path / "wrapped.log", wrapped), tmp_path, year=2025)
    assert stats(con) == expect
    assert entry["quarantined"] == 0
    assert entry["lines"]["continuation"] == len(wrapped) - len(lines)
    assert rows(con, "SELECT count(*) FROM requests") == [(10,)]


def test_block_boundaries_change_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines, expect = scenario()
    path = write(tmp_path / "wrapped.log", f.hard_wrap(lines, 97))
    _, whole = ingest_log(path, tmp_path / "a", year=2025)
    monkeypatch.setattr(ln, "BLOCK_BYTES", 1000)
    con, split = ingest_log(path, tmp_path / "b", year=2025)
    assert stats(con) == expect
    for key in ("rows", "lines", "records", "quarantined"):
        assert split[key] == whole[key]


def test_compressed_input(tmp_path: Path) -> None:
    lines, expect = scenario()
    path = tmp_path / "gen.log.gz"
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    con, entry = ingest_log(path, tmp_path, year=2025)
    assert stats(con) == expect
    assert entry["format"] == "vllm-log"


def _wrap_lines() -> list[str]:
    dec = dt.datetime(2024, 12, 31, 23, 59, 55, tzinfo=dt.UTC)
    items = [f.Stat(dec + dt.timedelta(seconds=5 * i), 1.0, 2.0, 1, 0, 50.0) for i in range(3)]
    return [f.v0_stats(s) for s in items]


def test_year_rollover_from_option(tmp_path: Path) -> None:
    con, entry = ingest_log(write(tmp_path / "wrap.log", _wrap_lines()), tmp_path, year=2024)
    assert [r[0] for r in stats(con)] == [
        ns("2024-12-31 23:59:55"), ns("2025-01-01 00:00:00"), ns("2025-01-01 00:00:05")
    ]  # fmt: skip
    assert entry["assumptions"] == {
        "year": 2024, "year_from": "--year", "tz": "UTC", "year_wraps": 1
    }  # fmt: skip


def test_default_year_from_mtime_and_time_zone(tmp_path: Path) -> None:
    path = write(tmp_path / "wrap.log", _wrap_lines())
    # Written on 2 January 2025: the log's December stamps are from 2024.
    mtime = dt.datetime(2025, 1, 2, tzinfo=dt.UTC).timestamp()
    os.utime(path, (mtime, mtime))
    berlin = dt.timezone(dt.timedelta(hours=1))  # CET, no DST in winter
    con, entry = ingest_log(path, tmp_path, tz="Europe/Berlin")
    assert stats(con)[0][0] == ns("2024-12-31 23:59:55", berlin)
    assert entry["assumptions"]["year"] == 2024
    assert entry["assumptions"]["year_from"] == "file mtime"
    assert entry["assumptions"]["tz"] == "Europe/Berlin"


def test_a_log_copied_before_its_day_came_round_again_is_from_the_year_before(
    tmp_path: Path,
) -> None:
    """A yearless log of 16 December copied on 7 December 2026 (a fresh clone, a download)
    ran in 2025: 2026 would put it after the file was written, and warn about its own guess.
    The real vLLM 0.2 log (tests/data/real/vllm/) is such a file."""
    real = REAL / "vllm" / "vllm_v0_0.2.x_llm_engine_kv_near_full_single_req_hang.log"
    path = tmp_path / real.name
    path.write_bytes(real.read_bytes())
    mtime = dt.datetime(2026, 12, 7, 13, 52, tzinfo=dt.UTC).timestamp()
    os.utime(path, (mtime, mtime))
    [result] = ingest([path], tmp_path / "ds.tq")
    assert result.assumptions["year"] == 2025
    assert not any("after the file's mtime" in w for w in result.warnings), result.warnings


@pytest.mark.parametrize(
    ("first", "mtime", "year"),
    [
        (["12-08 00:58:00"], "2026-12-07T13:52", 2026),  # a zone ahead of UTC: the next day
        (["01-01 00:10:00"], "2025-12-31T23:00", 2026),  # ... already in the new year
        (["12-31 23:59:55"], "2025-01-02T00:00", 2024),  # begun in December, written in January
        (["02-29 08:00:00"], "2026-03-05T00:00", 2024),  # the last year with a 29 February
        # stamps that are no date do not pick the year: the first real one does
        (["00-15 00:00:00", "06-20 10:00:00"], "2026-01-10T00:00", 2025),
        (["06-99 00:00:00", "06-20 10:00:00"], "2026-08-01T00:00", 2026),
    ],
)
def test_the_mtime_year_is_the_latest_the_first_real_date_fits(first, mtime, year) -> None:
    written = dt.datetime.fromisoformat(mtime).replace(tzinfo=dt.UTC).timestamp()
    clock = Clock(tz="UTC", year=None, mtime=written)
    clock.vllm_ts(pl.Series(first))
    assert (clock.year, clock.year_from) == (year, "file mtime")


def test_cli_format_option_for_a_pasted_log(tmp_path: Path) -> None:
    lines, _ = scenario()
    prose = "Notes on the run.\n" * 5000  # > 64 KiB before the log: nothing to sniff
    path = tmp_path / "notes.md"
    path.write_text(prose + "```\n" + "\n".join(lines) + "\n```\n")
    runner = CliRunner()
    auto = runner.invoke(cli, ["ingest", str(path), "-o", str(tmp_path / "a.tq")])
    assert auto.exit_code == 2 and "unrecognised format" in auto.output
    ok = runner.invoke(
        cli, ["ingest", str(path), "-o", str(tmp_path / "b.tq"), "--format", "vllm-log",
              "--year", "2025"],
    )  # fmt: skip
    assert ok.exit_code == 0, ok.output
    assert "vllm-log: 60 engine_stats" in ok.output
    formats = runner.invoke(cli, ["formats"]).output
    assert "vllm-log" in formats and "sglang-log" in formats


def test_sniffing_claims_only_server_logs(tmp_path: Path) -> None:
    lines, _ = scenario()
    log = write(tmp_path / "server.txt", lines)
    _, entry = ingest_log(log, tmp_path / "a")
    assert entry["format"] == "vllm-log"
    otlp = tmp_path / "trace.json"
    otlp.write_text('{"resourceSpans": []}\n')
    _, entry = ingest_log(otlp, tmp_path / "b")
    assert entry["format"] == "otlp-json"
    prose = write(tmp_path / "readme.txt", ["INFO nothing here", "just text"])
    runner = CliRunner()
    result = runner.invoke(cli, ["ingest", str(prose), "-o", str(tmp_path / "c.tq")])
    assert result.exit_code == 2


def test_frame_of_lines_matches_python_split() -> None:
    data = "a\r\nb\n\nc\xe9\nlast".encode()
    frame = ln.split_lines(data, 1)
    assert frame["text"].to_list() == ["a", "b", "", "c\xe9", "last"]
    assert frame["line_no"].to_list() == [1, 2, 3, 4, 5]
    assert not frame["bad_utf8"].any()
    assert pl.Series(frame["text"]).len() == 5


def test_stats_line_variants(tmp_path: Path) -> None:
    """Every stats-line variant vLLM has printed (V0 vllm/engine/metrics.py, V1
    vllm/v1/metrics/loggers.py, across versions), one line each."""
    lines = [
        # ≤ 0.2.0: combined throughput, no trailing full stop.
        "INFO 05-09 00:49:33 scheduler.py:271] Throughput: 12.5 tokens/s, Running: 1 reqs, "
        "Swapped: 0 reqs, Pending: 2 reqs, GPU KV cache usage: 92.9%, CPU KV cache usage: 0.0%",
        # Early V1 (0.7.x): no engine index; its earliest form stops after `Waiting`.
        "INFO 03-11 06:18:48 [loggers.py:80] Avg prompt throughput: 1.5 tokens/s, Avg generation "
        "throughput: 2.5 tokens/s, Running: 3 reqs, Waiting: 4 reqs, GPU KV cache usage: 0.6%, "
        "Prefix cache hit rate: 12.5%",
        "INFO 03-11 06:18:58 [loggers.py:80] Avg prompt throughput: 1.0 tokens/s, Avg generation "
        "throughput: 2.0 tokens/s, Running: 3 reqs, Waiting: 4 reqs ",
        # ≥ 0.11 with the KV-connector and multimodal hit rates, DP engine 1.
        "(APIServer pid=7) INFO 11-02 10:00:00 [loggers.py:236] Engine 001: Avg prompt "
        "throughput: 0.0 tokens/s, Avg generation throughput: 40.1 tokens/s, Running: 2 reqs, "
        "Waiting: 0 reqs, GPU KV cache usage: 3.5%, Prefix cache hit rate: 23.6%, External "
        "prefix cache hit rate: 50.0%, MM cache hit rate: 0.0%",
        # A hardware plugin without the prefix-cache field; Ray's repeat marker.
        "(RayWorkerWrapper pid=345, ip=10.0.0.1) INFO 11-02 10:00:10 [loggers.py:271] Engine "
        "000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 9.9 tokens/s, "
        "Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.6% [repeated 3x across cluster]",
    ]
    con, entry = ingest_log(write(tmp_path / "v.log", lines), tmp_path, year=2025)
    ray = "RayWorkerWrapper pid=345, ip=10.0.0.1"  # the nested process prefix
    got = rows(con, "SELECT line, engine, throughput_tps, prompt_tps, gen_tps, running, waiting, "
                    "kv_usage, prefix_hit_rate, ext_prefix_hit_rate, mm_hit_rate, process "
                    "FROM engine_stats ORDER BY line")  # fmt: skip
    assert got == [
        (1, 0, 12.5, None, None, 1, 2, 0.929, None, None, None, None),
        (2, 0, None, 1.5, 2.5, 3, 4, 0.006, 0.125, None, None, None),
        (3, 0, None, 1.0, 2.0, 3, 4, None, None, None, None, None),
        (4, 1, None, 0.0, 40.1, 2, 0, 0.035, 0.236, 0.5, 0.0, "APIServer pid=7"),
        (5, 0, None, 0.0, 9.9, 1, 0, 0.006, None, None, None, ray),
    ]  # fmt: skip
    assert entry["quarantined"] == 0


def test_failure_lines(tmp_path: Path) -> None:
    lines = [
        "(EngineCore_DP0 pid=9) ERROR 06-01 10:00:00 [core.py:700] EngineCore failed to start.",
        "(EngineCore_DP0 pid=9) ERROR 06-01 10:00:00 [core.py:700] Traceback (most recent call "
        "last):",
        '(EngineCore_DP0 pid=9) ERROR 06-01 10:00:00 [core.py:700]   File "x.py", line 1, in f',
        "(EngineCore_DP0 pid=9) ERROR 06-01 10:00:00 [core.py:700] torch.OutOfMemoryError: CUDA "
        "out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.25 GiB",
        "ValueError: No available memory for the cache blocks. Try increasing "
        "gpu_memory_utilization when initializing the engine.",
        "(APIServer pid=8) ERROR 06-01 10:00:01 [async_llm.py:704] vllm.v1.engine.exceptions."
        "EngineDeadError: EngineCore encountered an issue.",
        "RuntimeError: something else went wrong",
    ]
    con, entry = ingest_log(write(tmp_path / "f.log", lines), tmp_path, year=2025)
    got = rows(con, "SELECT line, kind, severity, ts FROM events ORDER BY line, kind")
    t = ns("2025-06-01 10:00:00")
    assert got == [
        (1, "engine_start_failed", "ERROR", t),
        (4, "oom", "ERROR", t),
        (4, "oom_total_gib", "INFO", t),
        (5, "kv_cache_insufficient", "ERROR", t),
        (6, "engine_dead", "ERROR", t + 1_000_000_000),
        (7, "error", "ERROR", t + 1_000_000_000),
    ]
    assert entry["unrecognised"] == {"traceback": 2}


def test_year_rollover_across_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ln, "BLOCK_BYTES", 300)  # about one line per block
    con, entry = ingest_log(write(tmp_path / "wrap.log", _wrap_lines()), tmp_path, year=2024)
    assert [r[0] for r in stats(con)] == [
        ns("2024-12-31 23:59:55"), ns("2025-01-01 00:00:00"), ns("2025-01-01 00:00:05")
    ]  # fmt: skip
    assert entry["assumptions"]["year_wraps"] == 1


def test_logging_prefix_and_mixed_servers(tmp_path: Path) -> None:
    """VLLM_LOGGING_PREFIX text before the level; SGLang and vLLM lines in one file."""
    lines = [
        "[my-pod-7] INFO 05-01 08:00:00 [loggers.py:236] Engine 000: Avg prompt throughput: "
        "1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 "
        "reqs, GPU KV cache usage: 0.5%, Prefix cache hit rate: 0.0%",
        "[2025-05-01 08:00:01 DP1 TP4] Decode batch. #running-req: 3, #token: 90, token usage: "
        "0.25, gen throughput (token/s): 10.50, #queue-req: 2, ",
    ]
    con, entry = ingest_log(write(tmp_path / "m.log", lines), tmp_path, year=2025)
    assert entry["format"] == "sglang-log"
    got = rows(con, "SELECT line, ts, engine, ranks, running, waiting, kv_usage, gen_tps, "
                    "cuda_graph FROM engine_stats ORDER BY line")  # fmt: skip
    assert got == [
        (1, ns("2025-05-01 08:00:00"), 0, None, 1, 0, 0.005, 2.0, None),
        (2, ns("2025-05-01 08:00:01"), 1, "DP1 TP4", 3, 2, 0.25, 10.5, None),
    ]
