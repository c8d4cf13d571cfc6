"""Bad OpenTelemetry input: good records land, every bad one is quarantined with a reason,
nothing crashes; unreadable or empty named inputs are a one-line error with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import traceq
from tests.otel_factory import MS, T0, RequestSpec, make_spans, otlp_json_lines


def _lines(n: int = 3) -> list[str]:
    specs = [
        RequestSpec(
            f"r{i}",
            arrival=T0 + i * 100 * MS,
            tokens=[T0 + i * 100 * MS + 5 * MS],
            attributes={"gen_ai.request.id": f"r{i}"},
        )
        for i in range(n)
    ]
    return otlp_json_lines(make_spans(specs), per_line=1).splitlines()


def _ingest(tmp_path: Path, text: str, name: str = "in.jsonl") -> tuple[Path, list[dict]]:
    src = tmp_path / name
    src.write_text(text)
    ds = tmp_path / "ds"
    traceq.ingest([src], ds)
    quarantine = traceq.open(ds).sql("SELECT * FROM quarantine ORDER BY location").pl()
    return ds, quarantine.to_dicts()


def _request_ids(ds: Path) -> list[str]:
    rows = traceq.open(ds).sql("SELECT request_id FROM requests ORDER BY 1").fetchall()
    return [r[0] for r in rows]


def test_truncated_last_line(tmp_path):
    lines = _lines()
    text = "\n".join([*lines[:2], lines[2][: len(lines[2]) // 2]])
    ds, bad = _ingest(tmp_path, text)
    assert _request_ids(ds) == ["r0", "r1"]
    assert [(b["location"], b["reason"]) for b in bad] == [("line 3", "truncated JSON line")]
    assert bad[0]["raw"].startswith('{"resourceSpans"')


def test_non_json_line(tmp_path):
    lines = _lines()
    ds, bad = _ingest(tmp_path, "\n".join([lines[0], "this is not json", *lines[1:]]) + "\n")
    assert _request_ids(ds) == ["r0", "r1", "r2"]
    assert len(bad) == 1
    assert bad[0]["location"] == "line 2"
    assert bad[0]["reason"].startswith("not JSON")
    assert bad[0]["raw"] == "this is not json"


def _with_span(line: str, edit) -> str:
    doc = json.loads(line)
    edit(doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0])
    return json.dumps(doc)


def test_span_without_timestamps(tmp_path):
    lines = _lines()

    def drop_times(span: dict) -> None:
        del span["startTimeUnixNano"], span["endTimeUnixNano"]

    lines[1] = _with_span(lines[1], drop_times)
    ds, bad = _ingest(tmp_path, "\n".join(lines))
    assert _request_ids(ds) == ["r0", "r2"]
    assert [b["reason"] for b in bad] == ["span has no valid start / end timestamp"]
    assert bad[0]["location"].startswith("line 2 ")


def test_unknown_attribute_type(tmp_path):
    lines = _lines()

    def add_odd(span: dict) -> None:
        span["attributes"].append({"key": "odd", "value": {"mysteryValue": 7}})

    lines[0] = _with_span(lines[0], add_odd)
    ds, bad = _ingest(tmp_path, "\n".join(lines))
    assert _request_ids(ds) == ["r0", "r1", "r2"]  # the span itself is fine
    assert [b["reason"] for b in bad] == ["attribute odd has no known AnyValue type"]
    assert "mysteryValue" not in bad[0]["raw"] or "7" in bad[0]["raw"]
    attrs = traceq.open(ds).sql("SELECT attributes FROM spans WHERE request_id = 'r0'")
    assert "odd" not in json.loads(attrs.fetchall()[0][0])


def test_duplicated_span(tmp_path):
    lines = _lines()
    ds, bad = _ingest(tmp_path, "\n".join([*lines, lines[1]]))
    assert _request_ids(ds) == ["r0", "r1", "r2"]
    tokens = traceq.open(ds).sql("SELECT count(*) FROM tokens WHERE request_id = 'r1'")
    assert tokens.fetchall() == [(1,)]
    assert len(bad) == 1
    assert bad[0]["location"].startswith("line 4 ")
    assert "duplicate span" in bad[0]["reason"] and "first seen on line 2" in bad[0]["reason"]


def test_document_without_spans_and_wrong_shape(tmp_path):
    lines = _lines(1)
    text = "\n".join([lines[0], '{"hello": 1}', "[1, 2]", '{"resourceSpans": "oops"}'])
    ds, bad = _ingest(tmp_path, text)
    assert _request_ids(ds) == ["r0"]
    reasons = {b["location"]: b["reason"] for b in bad}
    assert reasons["line 2"] == "JSON object has no resourceSpans"
    assert reasons["line 3"] == "not a JSON object"
    assert reasons["line 4"].startswith("does not match the OTLP/JSON schema")


def test_blank_lines_keep_line_numbers(tmp_path):
    lines = _lines()
    ds, bad = _ingest(tmp_path, "\n".join([lines[0], "", lines[1], "", "garbage", lines[2]]))
    assert _request_ids(ds) == ["r0", "r1", "r2"]
    assert [b["location"] for b in bad] == ["line 5"]


def test_directory_with_unrelated_file(tmp_path):
    folder = tmp_path / "incident"
    folder.mkdir()
    (folder / "traces.jsonl").write_text("\n".join(_lines()))
    (folder / "notes.txt").write_text("on-call notes: restarted the pod at 03:12\n")
    (folder / "empty.jsonl").write_text("")
    results = traceq.ingest([folder], tmp_path / "ds")
    status = {r.path.name: r.status for r in results}
    assert status == {
        "traces.jsonl": "ingested",
        "notes.txt": "unrecognised",
        "empty.jsonl": "unrecognised",
    }
    con = traceq.open(tmp_path / "ds")
    assert con.sql("SELECT count(*) FROM requests").fetchall() == [(3,)]
    reasons = sorted(r[0] for r in con.sql("SELECT reason FROM quarantine").fetchall())
    assert reasons == ["empty file", "no ingester recognises this file"]


def test_proto_truncated_frame(tmp_path):
    import struct

    from tests.otel_factory import otlp_proto_bytes

    spans = make_spans(
        [
            RequestSpec(f"p{i}", tokens=[T0 + MS], attributes={"gen_ai.request.id": f"p{i}"})
            for i in range(2)
        ]
    )
    frames = [otlp_proto_bytes([s]) for s in spans]
    data = b"".join(struct.pack(">I", len(f)) + f for f in frames)
    src = tmp_path / "cut.binpb"
    src.write_bytes(data[:-7])
    traceq.ingest([src], tmp_path / "ds")
    con = traceq.open(tmp_path / "ds")
    assert con.sql("SELECT request_id FROM requests").fetchall() == [("p0",)]
    (reason,) = con.sql("SELECT reason FROM quarantine").fetchall()[0]
    assert reason.startswith("truncated message")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "traceq", *args], capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda p: p.write_text(""), "empty file"),
        (lambda p: None, "no such file or directory"),
        (lambda p: p.write_text("hello\n"), "unrecognised format"),
    ],
)
def test_cli_bad_named_input_is_one_line_exit_2(tmp_path, setup, message):
    src = tmp_path / "input.jsonl"
    setup(src)
    result = _cli("ingest", str(src), "-o", str(tmp_path / "ds"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "ds").exists()


def test_cli_corrupt_gzip_is_unreadable(tmp_path):
    src = tmp_path / "traces.jsonl.gz"
    src.write_bytes(b"\x1f\x8b\x08\x00" + b"not really deflate data" * 4)
    result = _cli("ingest", str(src), "-o", str(tmp_path / "ds"))
    assert result.returncode == 2
    assert "cannot decompress" in result.stderr
    assert result.stderr.count("\n") == 1


def test_unreadable_file_inside_a_directory_is_quarantined(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_text("\n".join(_lines(1)))
    (folder / "b.jsonl.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    results = traceq.ingest([folder], tmp_path / "ds")
    assert [r.status for r in results] == ["ingested", "unrecognised"]


def test_gzip_cut_short_keeps_what_was_readable(tmp_path):
    import gzip

    lines = [line for line in _lines(3)]
    blob = gzip.compress(("\n".join(lines) + "\n").encode() * 40)
    src = tmp_path / "cut.jsonl.gz"
    src.write_bytes(blob[: int(len(blob) * 0.6)])
    traceq.ingest([src], tmp_path / "ds")
    con = traceq.open(tmp_path / "ds")
    assert con.sql("SELECT count(*) > 0 FROM requests").fetchall() == [(True,)]
    reasons = [r[0] for r in con.sql("SELECT reason FROM quarantine").fetchall()]
    assert any(r.startswith("compressed data is corrupt or truncated") for r in reasons)


def test_a_reader_crash_loses_only_that_file(tmp_path, monkeypatch):
    """A reader bug (or input no reader foresaw) fails one file, not the whole ingest."""
    from traceq.ingest import otel

    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_text("\n".join(_lines(2)))
    (folder / "b.jsonl").write_text("\n".join(_lines(3)))
    real = otel.ingest

    def flaky(source, *args, **kwargs):
        if source.path.name == "b.jsonl":
            raise RuntimeError("boom")
        return real(source, *args, **kwargs)

    monkeypatch.setattr(otel, "ingest", flaky)
    from click.testing import CliRunner

    from traceq.cli import cli

    run = CliRunner().invoke(cli, ["ingest", str(folder), "-o", str(tmp_path / "cli.tq")])
    assert run.exit_code == 2 and "b.jsonl: otlp-json reader failed" in run.output
    results = traceq.ingest([folder], tmp_path / "ds")
    assert [(r.path.name, r.status) for r in results] == [
        ("a.jsonl", "ingested"),
        ("b.jsonl", "failed"),
    ]
    con = traceq.open(tmp_path / "ds")
    assert con.sql("SELECT count(*) FROM requests").fetchall() == [(2,)]
    (reason,) = con.sql("SELECT reason FROM quarantine").fetchall()[0]
    assert reason == "otlp-json reader failed: RuntimeError: boom"
    monkeypatch.undo()  # the reader is fixed: the failed file is read again, not skipped
    again = traceq.ingest([folder], tmp_path / "ds")
    assert [r.status for r in again] == ["already ingested", "ingested"]
    con = traceq.open(tmp_path / "ds")
    assert con.sql("SELECT count(*) FROM requests").fetchall() == [(5,)]
    assert con.sql("SELECT count(*) FROM quarantine").fetchall() == [(0,)]


def test_framed_stream_whose_first_message_is_over_2_mib(tmp_path):
    """A message's first field length takes four varint bytes from 2 MiB on: the stream is
    still read as framed (its head shows the length cut short), every request kept."""
    import struct

    from tests.otel_factory import otlp_proto_bytes

    tokens = [T0 + i * MS for i in range(40)]
    specs = [
        RequestSpec(f"r{i}", tokens=tokens, attributes={"k": "v" * 20_000}) for i in range(160)
    ]
    first = otlp_proto_bytes(make_spans(specs))
    assert len(first) > 2 << 20
    second = otlp_proto_bytes(make_spans([RequestSpec("last", tokens=[T0 + MS])]))
    src = tmp_path / "big.binpb"
    src.write_bytes(b"".join(struct.pack(">I", len(m)) + m for m in (first, second)))
    (result,) = traceq.ingest([src], tmp_path / "ds")
    assert (result.format, result.quarantined, result.rows["requests"]) == ("otlp-proto", 0, 161)


def test_a_zip_is_not_protobuf(tmp_path):
    """A zip of stored files (Info-ZIP's `zip -0`: version 1.0 needed) starts like a framed
    message: `PK\\x03\\x04` a length, then 0x0a the first field's tag."""
    import zipfile

    from traceq.ingest import InputError

    notes = tmp_path / "notes.zip"
    with zipfile.ZipFile(notes, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr("notes.md", "# what we saw\n")
    data = bytearray(notes.read_bytes())
    data[4:6] = b"\x0a\x00"
    notes.write_bytes(bytes(data))
    with pytest.raises(InputError, match="unrecognised format"):
        traceq.ingest([notes], tmp_path / "ds")
