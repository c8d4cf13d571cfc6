"""Hostile inputs generated on the fly (never stored) and a peak-RSS probe of `traceq ingest`.

Shared by tests/test_hostile_*.py (small sizes) and bench/hostile.py (the full-size probes,
docs/RELIABILITY.md). Every generator streams its output, so making a 1.5 GB bomb takes little
memory.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

CHUNK = 1 << 20
SMI_HEADER = b"timestamp, name, index, utilization.gpu [%], memory.used [MiB]\n"
OTLP_HEAD = b'{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[{"spans":[{"name":"'


def _filler(n: int, byte: bytes = b"A") -> Iterator[bytes]:
    block = byte * CHUNK
    while n > 0:
        yield block[: min(n, CHUNK)]
        n -= CHUNK


def gzip_bomb(path: Path, head: bytes, line_bytes: int) -> Path:
    """`head` then `line_bytes` bytes without a newline, gzipped (about 1,000:1)."""
    with gzip.open(path, "wb", compresslevel=6) as out:
        out.write(head)
        for piece in _filler(line_bytes):
            out.write(piece)
    return path


def _span(i: int, attributes: bytes = b"[]") -> bytes:
    trace = f"{i + 1:032x}".encode()
    span = f"{i + 1:016x}".encode()
    start = 1_700_000_000_000_000_000 + i * 1_000_000
    return (
        b'{"traceId":"' + trace + b'","spanId":"' + span + b'","name":"llm_request",'
        b'"kind":2,"startTimeUnixNano":"' + str(start).encode() + b'",'
        b'"endTimeUnixNano":"' + str(start + 500_000_000).encode() + b'",'
        b'"attributes":' + attributes + b"}"
    )


def _document(spans: Iterator[bytes]) -> Iterator[bytes]:
    yield b'{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":'
    yield b'{"stringValue":"vllm"}}]},"scopeSpans":[{"spans":['
    for n, span in enumerate(spans):
        yield (b"," if n else b"") + span
    yield b"]}]}]}\n"


def wide_span(path: Path, n_attributes: int) -> Path:
    """One OTLP/JSON line holding one span with `n_attributes` string attributes."""

    def attributes() -> Iterator[bytes]:
        yield b"["
        for i in range(n_attributes):
            sep = b"," if i else b""
            yield sep + b'{"key":"attr.%d","value":{"stringValue":"v%d"}}' % (i, i)
        yield b"]"

    with open(path, "wb") as out:
        out.write(b"".join(_document(iter([_span(0, b"".join(attributes()))]))))
        out.write(b"".join(_document(iter([_span(1)]))))  # and one ordinary line after it
    return path


def long_otlp_line(path: Path, line_bytes: int, value_bytes: int = 0) -> Path:
    """A valid OTLP/JSON line of about `line_bytes` bytes (many spans, each with a string
    attribute of `value_bytes`), then a short line."""
    value = b'[{"key":"prompt","value":{"stringValue":"' + b"p" * value_bytes + b'"}}]'

    def spans() -> Iterator[bytes]:
        size, i = 0, 0
        while size < line_bytes:
            span = _span(i, value)
            size += len(span) + 1
            i += 1
            yield span

    with open(path, "wb") as out:
        for piece in _document(spans()):
            out.write(piece)
        out.write(b"".join(_document(iter([_span(10**9)]))))
    return path


# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec, so a child of a large test process
# would report the parent's peak (bench/harness.py measures the same way).
_MEASURE = """
import atexit, sys
def _peak():
    with open("/proc/self/status") as fh:
        kib = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM"))
    sys.stderr.write(f"\\npeak_rss_kib={kib}\\n")
atexit.register(_peak)
sys.argv = ["traceq", *sys.argv[1:]]
from traceq.cli import main
main()
"""


def run_measured(*args: str | os.PathLike[str]) -> tuple[int, str, float]:
    """Run `traceq ARGS` in a fresh process: (exit code, output, peak RSS in MiB)."""
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = proc.stderr.strip().splitlines()
    peak = next(int(x.split("=")[1]) for x in reversed(lines) if x.startswith("peak_rss_kib="))
    output = proc.stdout + "\n".join(x for x in lines if not x.startswith("peak_rss_kib="))
    return proc.returncode, output, peak / 1024
