"""Every file accounted for, even the unreadable ones; environment problems are a
one-line message that says what to do."""

from __future__ import annotations

import builtins
import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

import traceq
from tests.otel_factory import MS, T0, RequestSpec, make_spans, write_otlp_json
from traceq.dataset import Dataset
from traceq.ingest import InputError
from traceq.ingest.source import Source


def _incident(tmp_path: Path) -> Path:
    folder = tmp_path / "incident"
    folder.mkdir()
    for name in ("a", "locked"):
        specs = [RequestSpec(f"{name}{i}", arrival=T0 + i * MS) for i in range(3)]
        write_otlp_json(make_spans(specs), folder / f"{name}.jsonl")
    return folder


def _cli(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "traceq", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def test_unreadable_file_in_a_directory_is_listed_and_the_rest_lands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _incident(tmp_path)
    locked = folder / "locked.jsonl"
    if os.geteuid() == 0:  # root reads any file: deny this one as the kernel would (EACCES)
        real_open = builtins.open

        def deny(path, *args, **kwargs):  # type: ignore[no-untyped-def]
            if Path(path) == locked:
                raise PermissionError(errno.EACCES, "Permission denied", str(path))
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr(sys.modules[Source.__module__], "open", deny, raising=False)
    else:
        locked.chmod(0)
    results = traceq.ingest([folder], tmp_path / "ds")
    assert {r.path.name: r.status for r in results} == {
        "a.jsonl": "ingested",
        "locked.jsonl": "unreadable",
    }
    con = traceq.open(tmp_path / "ds")
    assert con.sql("SELECT count(*) FROM requests").fetchall() == [(3,)]
    assert con.sql("SELECT reason FROM quarantine").fetchall() == [
        ("cannot read: Permission denied",)
    ]
    monkeypatch.undo()
    locked.chmod(0o644)
    again = {r.path.name: r.status for r in traceq.ingest([folder], tmp_path / "ds")}
    assert again["locked.jsonl"] == "ingested"  # read once it can be
    statuses = [s.get("status") for s in Dataset(tmp_path / "ds").sources()]
    assert "unreadable" not in statuses and len(statuses) == 2


def test_fifo_in_a_directory_is_listed_as_skipped(tmp_path: Path) -> None:
    folder = _incident(tmp_path)
    os.mkfifo(folder / "pipe")
    result = _cli("ingest", folder, "-o", tmp_path / "ds")  # would block forever on the FIFO
    assert result.returncode == 0, result.stderr
    assert f"{folder / 'pipe'}: a FIFO (named pipe), skipped" in result.stdout


def test_fifo_named_explicitly_says_what_it_is(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(InputError, match="pipe: a FIFO \\(named pipe\\), not a regular file"):
        traceq.ingest([tmp_path / "pipe"], tmp_path / "ds")
    result = _cli("ingest", "/dev/stdin", "-o", tmp_path / "ds2")
    assert result.returncode == 2
    assert "no such file" not in result.stderr and "not a regular file" in result.stderr


def test_folder_a_link_leads_out_of_is_listed_and_the_rest_lands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A link in the folder into a place this user may not enter (stat fails with EACCES, as
    for another user's /proc/PID/cwd) is a skipped entry that says so, not a traceback."""
    folder = _incident(tmp_path)
    denied = folder / "other-users-cwd"
    denied.symlink_to(tmp_path / "elsewhere")
    real_stat = Path.stat

    def stat(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if path == denied:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(Path, "stat", stat)
    results = {r.path.name: (r.status, r.detail) for r in traceq.ingest([folder], tmp_path / "ds")}
    assert results["other-users-cwd"] == ("skipped", "not readable (Permission denied)")
    assert results["a.jsonl"][0] == results["locked.jsonl"][0] == "ingested"
    with pytest.raises(InputError, match=r"other-users-cwd: not readable \(Permission denied\)$"):
        traceq.ingest([denied], tmp_path / "ds2")


def test_one_path_given_as_text_is_that_path(tmp_path: Path) -> None:
    """`traceq.ingest("trace.jsonl", ...)`: one file, not one path per character of its name
    (`/` among them: the whole file system)."""
    folder = _incident(tmp_path)
    results = traceq.ingest(str(folder / "a.jsonl"), tmp_path / "ds")
    assert [(r.path.name, r.status) for r in results] == [("a.jsonl", "ingested")]
    results = traceq.ingest(folder, tmp_path / "ds2")
    assert sorted(r.path.name for r in results) == ["a.jsonl", "locked.jsonl"]


REAL = Path(__file__).parent / "data" / "real"
SAMPLES = Path(__file__).parent.parent / "sample_traces" / "healthy"
BOM_FILES = [
    REAL / "gpu" / "nvidia-smi_dmon_s_pucvmet_jpg_ofa_doc_example.txt",  # was unrecognised
    REAL / "gpu" / "dcgmi_dmon_h800_group_pcie_nvlink_llm-action.txt",
    REAL / "gpu" / "dcgm_exporter_metrics_T4_loaded_ericsson_ccd.prom",
    REAL / "sglang" / "sglang_2025-07_vlm_prefill_decode_TP0_timestamps.log",
    SAMPLES / "nvidia-smi.csv",
    SAMPLES / "traces.otlp.jsonl",
]


@pytest.mark.parametrize("path", BOM_FILES, ids=lambda p: p.name[:40])
def test_a_byte_order_mark_in_front_is_skipped(path: Path, tmp_path: Path) -> None:
    """Windows tools write a UTF-8 byte order mark in front of a log or CSV: the same rows as
    the file without it, nothing quarantined."""
    marked = tmp_path / path.name
    marked.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    options = traceq.IngestOptions(year=2025, start=1_749_981_600_000_000_000)
    (plain,) = traceq.ingest([path], tmp_path / "plain.tq", options=options)
    (got,) = traceq.ingest([marked], tmp_path / "marked.tq", options=options)
    assert (got.format, got.rows, got.quarantined) == (plain.format, plain.rows, 0)
    assert plain.rows
