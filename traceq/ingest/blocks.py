"""Reading a stream in bounded blocks of whole lines, shared by the line-oriented readers.

`LineCap` is the one memory bound of every reader: no line longer than `max_bytes`, and no
whole document of the formats parsed whole longer than `max_document_bytes`, is ever held.
`Source.open()` attaches the cap of the ingest to the stream; what exceeds it is listed in
`cap.rejected`, which the ingest driver writes to quarantine (traceq/ingest/__init__.py), so
nothing passes unnoticed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import orjson

from traceq.schema import RAW_LIMIT
from traceq.spill import trim_heap

MAX_LINE_BYTES = 32 << 20  # default cap (32 MiB): `--max-line-bytes` / IngestOptions changes it
# Formats parsed as one JSON document (load-test exports, Jaeger, pretty-printed OTLP) are held
# whole, and parsing costs ~12x their size: a real GenAI-Perf export is ~30 kB per request.
MAX_DOCUMENT_BYTES = 256 << 20  # `--max-document-bytes`
NEWLINE = 10


@dataclass
class LineCap:
    """The longest line or document a reader may hold in memory, and the ones that were longer."""

    max_bytes: int = MAX_LINE_BYTES
    max_document_bytes: int = MAX_DOCUMENT_BYTES
    rejected: list[dict[str, str]] = field(default_factory=list)

    def reject(self, location: str, what: str, head: bytes, document: bool = False) -> None:
        """Quarantine one over-long line / document (its head is kept as `raw`)."""
        limit, option = (
            (self.max_document_bytes, "--max-document-bytes")
            if document
            else (self.max_bytes, "--max-line-bytes")
        )
        reason = f"{what} longer than {limit:,} bytes, not read (raise {option} to read it)"
        raw = head[:RAW_LIMIT].decode("utf-8", "replace")
        self.rejected.append({"location": location, "reason": reason, "raw": raw})


def cap_of(stream: BinaryIO) -> LineCap | None:
    """The cap `Source.open()` attached to `stream` (None for a stream opened otherwise)."""
    return getattr(stream, "cap", None)


def iter_line_blocks(
    stream: BinaryIO,
    progress: Callable[[int], None],
    block_bytes: int,
    max_line_bytes: int | None = None,
) -> Iterator[tuple[bytes, int]]:
    """(block of whole lines, 1-based number of its first line), `block_bytes` read at a time.

    Lines longer than the stream's cap (or `max_line_bytes`, the smaller) are left out of the
    blocks and listed in `cap.rejected`; of a line without an end only its head is kept while
    the rest streams past, so a file without newlines cannot exhaust memory.
    """
    cap = cap_of(stream) or LineCap(max_bytes=max_line_bytes or 1 << 62)
    limit = min(cap.max_bytes, max_line_bytes or cap.max_bytes)
    carry = b""
    line_no = 1
    skipping = False  # inside an over-long line already rejected: drop bytes to its end
    while True:
        trim_heap()  # what the blocks before left free goes back to the system (traceq/spill.py)
        if not (chunk := stream.read(block_bytes)):
            break
        progress(len(chunk))
        if skipping:
            end = chunk.find(b"\n")
            if end < 0:
                continue
            chunk, skipping = chunk[end + 1 :], False
            line_no += 1
        data = carry + chunk if carry else chunk
        cut = data.rfind(b"\n")
        block, carry = (b"", data) if cut < 0 else (data[: cut + 1], data[cut + 1 :])
        for part, first, long in cut_long_lines(block, line_no, limit):
            if long:
                cap.reject(f"line {first}", "line", part[:RAW_LIMIT])
            else:
                yield part, first
        line_no += block.count(b"\n")
        if len(carry) > limit:
            cap.reject(f"line {line_no}", "line", carry)
            carry, skipping = b"", True
    if skipping:
        line_no += 1
    if carry.strip():
        yield carry, line_no


def cut_long_lines(block: bytes, first: int, limit: int) -> Iterator[tuple[bytes, int, bool]]:
    """(part, number of its first line, is one line longer than `limit`) that make up
    `block` (whole lines), in order.

    Steps through the block `limit + 1` bytes at a time to the last newline in each stretch
    (every line before it is short), so a block of short lines costs a few backward searches,
    not a scan of every byte; lines are counted only where a long one is found.

    >>> list(cut_long_lines(b"ab\\nlong line\\ncd\\n", 1, 4))
    [(b'ab\\n', 1, False), (b'long line', 2, True), (b'cd\\n', 3, False)]
    """
    n = len(block)
    begin, begin_line = 0, first  # the short lines not yet yielded start here
    pos = 0  # a line starts here; every line between begin and pos is short
    while n - pos > limit:
        cut = block.rfind(b"\n", pos, pos + limit + 1)
        if cut >= 0:
            pos = cut + 1
            continue
        end = block.find(b"\n", pos)
        end = n if end < 0 else end
        line = begin_line + block.count(b"\n", begin, pos)
        if pos > begin:
            yield block[begin:pos], begin_line, False
        yield block[pos:end], line, True
        begin, begin_line = end + 1, line + 1
        pos = begin
    if begin < n:
        yield block[begin:], begin_line, False


def read_whole(stream: BinaryIO, progress: Callable[[int], None]) -> bytes | None:
    """The whole stream, for formats parsed as one document; None (rejected) past the cap."""
    cap = cap_of(stream)
    if cap is None:
        data = stream.read()
        progress(len(data))
        return data
    data = stream.read(cap.max_document_bytes + 1)
    progress(len(data))
    if len(data) <= cap.max_document_bytes:
        return data
    cap.reject("file", "document", data, document=True)
    del data
    while chunk := stream.read(1 << 24):  # stream the rest past, for the progress bar
        progress(len(chunk))
    return None


def is_json(text: bytes) -> bool:
    """Whether `text` is one whole JSON value."""
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True
