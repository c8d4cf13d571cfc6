"""Bad input never raises out of the server-log ingester: truncated lines, binary garbage, a
10 MB line, latin-1 bytes and impossible dates end up in quarantine or in the counts."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pytest

from tests import serverlog_factory as f
from tests.serverlog_helpers import ingest_log, ns, rows
from traceq.ingest import InputError
from traceq.ingest.serverlog import lines as ln

T0 = dt.datetime(2025, 5, 1, 8, 0, 0, tzinfo=dt.UTC)
GOOD = [f.v0_stats(s) for s in f.random_stats(T0, 4, seed=3)]


def write(path: Path, *parts: bytes) -> Path:
    path.write_bytes(b"".join(parts))
    return path


def good(*idx: int) -> bytes:
    return b"".join(GOOD[i].encode() + b"\n" for i in idx)


def test_truncated_stats_line(tmp_path: Path) -> None:
    cut = GOOD[1][: GOOD[1].index("Running") + 12]  # `… Running: 1` and the file goes on
    path = write(tmp_path / "t.log", good(0), cut.encode() + b"\n", good(2, 3))
    con, entry = ingest_log(path, tmp_path, year=2025)
    assert [r[0] for r in rows(con, "SELECT line FROM engine_stats ORDER BY line")] == [1, 3, 4]
    assert rows(con, "SELECT location, reason, raw FROM quarantine") == [
        ("line 2", "stats line does not parse (truncated or unknown variant)", cut)
    ]
    assert entry["quarantined"] == 1


def test_truncated_file_end(tmp_path: Path) -> None:
    path = write(tmp_path / "t.log", good(0, 1), GOOD[2][:60].encode())  # no final newline
    con, entry = ingest_log(path, tmp_path, year=2025)
    assert rows(con, "SELECT count(*) FROM engine_stats") == [(2,)]
    assert entry["quarantined"] == 1
    assert entry["lines"]["total"] == 3


def test_binary_garbage(tmp_path: Path) -> None:
    garbage = random.Random(7).randbytes(200_000)
    path = write(tmp_path / "g.log", good(0, 1), garbage, b"\n", good(2, 3))
    con, entry = ingest_log(path, tmp_path, fmt="vllm-log", year=2025)
    assert rows(con, "SELECT count(*) FROM engine_stats") == [(4,)]
    lines = entry["lines"]
    assert lines["invalid_utf8"] > 0
    assert sum(entry["records"].values()) + lines["blank"] + lines["continuation"] == lines["total"]
    assert set(entry["unrecognised"]) <= {"binary", "other", "process_output", "third_party"}
    assert entry["unrecognised"]["binary"] > 0


def test_ten_megabyte_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ln, "BLOCK_BYTES", 1 << 20)  # the line spans many read blocks
    huge = b"INFO 05-01 08:00:00 logger.py:39] Received request x: prompt: '" + b"a" * 10_000_000
    path = write(tmp_path / "h.log", good(0), huge, b"'\n", good(1))
    con, entry = ingest_log(path, tmp_path, year=2025)
    assert rows(con, "SELECT line FROM engine_stats ORDER BY line") == [(1,), (3,)]
    got = rows(con, "SELECT location, reason, length(raw) FROM quarantine")
    assert got == [("line 2", "line longer than 1 MiB (not parsed)", 512)]
    assert entry["lines"]["total"] == 3


def test_file_without_newlines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ln, "BLOCK_BYTES", 1 << 20)
    path = write(tmp_path / "n.bin", random.Random(3).randbytes(5_000_000).replace(b"\n", b" "))
    _, entry = ingest_log(path, tmp_path, fmt="vllm-log", year=2025)
    assert entry["lines"]["total"] == 1
    assert entry["quarantined"] == 1  # the one (over-long) line, its head kept as raw


def test_latin1_bytes(tmp_path: Path) -> None:
    warn = b"WARNING 05-01 08:00:01 config.py:1] Mod\xe8le charg\xe9 (latin-1)\n"
    path = write(tmp_path / "l.log", good(0), warn, good(1))
    con, entry = ingest_log(path, tmp_path, year=2025)
    assert entry["lines"]["invalid_utf8"] == 1
    assert rows(con, "SELECT line, message FROM events WHERE kind = 'warning'") == [
        (2, "Mod\ufffdle charg\ufffd (latin-1)")
    ]
    assert rows(con, "SELECT count(*) FROM engine_stats") == [(2,)]


def test_impossible_date_is_quarantined(tmp_path: Path) -> None:
    bad = GOOD[1].replace("05-01", "02-30", 1)
    path = write(tmp_path / "d.log", good(0), bad.encode() + b"\n")
    con, _ = ingest_log(path, tmp_path, year=2025)
    assert rows(con, "SELECT ts FROM engine_stats") == [(ns("2025-05-01 08:00:00"),)]
    assert rows(con, "SELECT location, reason FROM quarantine") == [("line 2", "invalid timestamp")]


def test_unknown_time_zone_is_a_clean_error(tmp_path: Path) -> None:
    path = write(tmp_path / "z.log", good(0))
    with pytest.raises(InputError, match="unknown time zone"):
        ingest_log(path, tmp_path, tz="Mars/Olympus")


def test_blank_only_file_with_explicit_format(tmp_path: Path) -> None:
    path = write(tmp_path / "b.log", b"\n\n   \n")
    _, entry = ingest_log(path, tmp_path, fmt="sglang-log")
    assert entry["rows"]["engine_stats"] == 0
    assert entry["lines"] == {"total": 3, "blank": 3, "continuation": 0, "invalid_utf8": 0}


def test_unparseable_known_messages_are_quarantined(tmp_path: Path) -> None:
    lines = [
        "INFO 05-01 08:00:00 llm_engine.py:1] Loading weights took many seconds",
        "WARNING 05-01 08:00:00 scheduler.py:1] Sequence group 5 is preempted by PreemptionMode"
        ".RECOMPUTE mode because there is not enough KV cache space. (counter missing)",
        "[2025-05-01 08:00:00 TP0] Decode batch. #running-req: 1, #token: oops",
    ]
    path = write(tmp_path / "q.log", "\n".join(lines).encode() + b"\n")
    con, _ = ingest_log(path, tmp_path, fmt="vllm-log", year=2025)
    assert rows(con, "SELECT location, reason FROM quarantine ORDER BY location") == [
        ("line 1", "unreadable startup line (weights_load)"),
        ("line 2", "preemption warning does not parse"),
        ("line 3", "SGLang batch line does not parse (truncated or unknown variant)"),
    ]
