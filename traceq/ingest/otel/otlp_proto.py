"""OTLP protobuf files: one serialised `ExportTraceServiceRequest`, or the Collector file
exporter's `format: proto` stream, where each message is preceded by its length as a 4-byte
big-endian unsigned integer (`exporter/fileexporter/file_writer.go`, exportMessageAsBuffer).
With the exporter's legacy `compression: zstd` each framed message is zstd-compressed on its
own (JSON messages too); with native compression the whole stream is (see source.py).

Each message is checked by protobuf's C parser (a bad one goes to quarantine), then a block of
them is decoded by numpy into the Arrow table pyarrow's JSON reader makes of the same
documents, and flattened as JSON is (proto_arrow.py, otlp_arrow.py): no Python per span or
event. The messages that reader declines are mapped to OTLP/JSON in Python (proto_shape.py)
and read by polars' JSON reader (otlp_json.py); once it declines most of a block, the file's
later messages take the JSON path (pyarrow's reader, polars' for what it leaves).
"""

from __future__ import annotations

import io
import re
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np
import orjson
import polars as pl
import zstandard
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from traceq.ingest.blocks import MAX_LINE_BYTES, cap_of, read_whole
from traceq.ingest.otel import otlp_arrow, otlp_json, proto_arrow
from traceq.ingest.otel.otlp_json import (
    MAX_POLARS_SHARE,
    TOKEN_EVENT,
    Quarantine,
    Readers,
    spans_of_lines,
)
from traceq.ingest.otel.proto_shape import as_document
from traceq.ingest.otel.proto_wire import WireError
from traceq.ingest.otel.spans import SPAN_FRAME
from traceq.ingest.otel.tokens import TOKEN_LEVEL_EVENTS
from traceq.ingest.source import ZSTD_MAGIC
from traceq.schema import RAW_LIMIT
from traceq.spill import trim_heap

RESOURCE_SPANS_TAG = 0x0A
# Messages are read this many bytes at a time (their JSON is about three times the size).
BLOCK_BYTES = 10 << 20  # field 1 (resource_spans), wire type 2


TEXT_PROBE_BYTES = 512
"""How much of a file's head `is_text` reads: an OTLP protobuf message shows control bytes
within its first bytes (a length prefix under 16 MiB starts with 0x00; the lengths of short
attribute keys, of a trace id (0x10) and a span id (0x08) are all below 0x20)."""
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]")


def is_text(head: bytes) -> bool:
    """Whether the first `TEXT_PROBE_BYTES` of `head` read as text: no control byte but tab,
    newline, carriage return and escape (a log's colours), whatever its encoding. A log that
    starts with a blank line begins with 0x0a, the tag of a bare message's first field, and
    `api:\\n` (a YAML file) reads as a length prefix and that tag: neither is protobuf.

    >>> is_text(b"\\nINFO 06-15 10:00:00 api_server.py:123] caf\\xe9 vLLM API server")
    True
    >>> is_text(bytes.fromhex("0a9f020a1c"))
    False
    """
    return _CONTROL.search(head[:TEXT_PROBE_BYTES]) is None


def opens_a_message(data: bytes) -> bool:
    """`data` starts with a non-empty `resource_spans` field: its tag, then a varint length of
    at least 1. A zip of stored files starts `PK\\x03\\x04\\x0a\\x00`: a length prefix, the tag
    and an empty field, which no exporter writes.

    >>> opens_a_message(bytes.fromhex("0a9f02")), opens_a_message(bytes.fromhex("0a00"))
    (True, False)
    """
    if data[:1] != bytes([RESOURCE_SPANS_TAG]):
        return False
    value, shift = 0, 0
    for byte in data[1:11]:
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value > 0
        shift += 7
    return len(data) < 11  # a length cut off by the end of `data` is still a length


def looks_framed(head: bytes) -> bool:
    """A length-prefixed stream: a plausible length followed by a message or zstd frame."""
    if len(head) < 5:
        return False
    (length,) = struct.unpack(">I", head[:4])
    return 0 < length < (1 << 31) and (opens_a_message(head[4:]) or head[4:8] == ZSTD_MAGIC)


def _frames(stream: BinaryIO, quarantine: Quarantine) -> Iterator[tuple[int, bytes]]:
    offset = 0
    while header := stream.read(4):
        if len(header) < 4:
            quarantine.append(_bad(offset, "truncated length prefix", header))
            return
        (length,) = struct.unpack(">I", header)
        cap = cap_of(stream)
        if cap is not None and length > cap.max_bytes:
            cap.reject(f"offset {offset}", f"message of {length:,} bytes", b"")
            if not _skip(stream, length):
                return
            offset += 4 + length
            continue
        payload = stream.read(length)
        if len(payload) < length:
            quarantine.append(
                _bad(offset, f"truncated message ({len(payload)} of {length} B)", payload)
            )
            return
        yield offset, payload
        offset += 4 + length


def _skip(stream: BinaryIO, length: int) -> bool:
    """Read `length` bytes past without holding them; False at an early end."""
    while length > 0:
        got = len(stream.read(min(length, 1 << 24)))
        if not got:
            return False
        length -= got
    return True


def _bad(offset: int, reason: str, raw: bytes) -> dict:
    return {"location": f"offset {offset}", "reason": reason, "raw": raw[:RAW_LIMIT].hex()}


def _unzstd(payload: bytes, limit: int) -> bytes:
    """A zstd-compressed message, decompressed up to `limit` bytes (a bomb stops there)."""
    parts, size = [], 0
    with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(payload)) as reader:
        while size <= limit and (part := reader.read(min(limit + 1 - size, 1 << 24))):
            parts.append(part)
            size += len(part)
    if size > limit:
        msg = f"decompresses past the line cap of {limit:,} bytes (--max-line-bytes)"
        raise zstandard.ZstdError(msg)
    return b"".join(parts)


@dataclass(frozen=True)
class _Message:
    """A message's protobuf bytes (checked by protobuf's parser), or, where the framed stream
    holds JSON, its document as a compact line."""

    data: bytes
    json: bool = False

    def line(self) -> bytes:
        """The message as an OTLP/JSON line."""
        if self.json:
            return self.data
        return orjson.dumps(as_document(ExportTraceServiceRequest.FromString(self.data)))


def _message(payload: bytes, limit: int) -> _Message:
    if payload.startswith(ZSTD_MAGIC):
        payload = _unzstd(payload, limit)
    head = payload[:64].lstrip() or payload.lstrip()  # not a copy of every message
    if head[:1] == b"{":  # a JSON message in a framed (compressed) stream
        return _Message(orjson.dumps(orjson.loads(payload)), json=True)
    ExportTraceServiceRequest.FromString(payload)  # protobuf's DecodeError for bad bytes
    return _Message(payload)


def iter_span_frames(
    stream: BinaryIO,
    quarantine: Quarantine,
    progress: Callable[[int], None],
    token_event: str = TOKEN_EVENT,
) -> Iterator[tuple[pl.DataFrame, pl.DataFrame]]:
    """Span frames of a protobuf file, a block of messages at a time."""
    head = stream.peek(16)[:16] if hasattr(stream, "peek") else b""
    if looks_framed(head):
        frames: Iterator[tuple[int, bytes]] = _frames(stream, quarantine)
    else:
        whole = read_whole(stream, lambda _: None)
        frames = iter([] if whole is None else [(0, whole)])
    cap = cap_of(stream)
    limit = cap.max_bytes if cap else MAX_LINE_BYTES
    readers = _Readers(Readers(token_event))
    messages: list[_Message] = []
    numbers: list[int] = []
    size = 0
    for number, (offset, payload) in enumerate(frames, start=1):
        progress(len(payload) + 4)
        try:
            message = _message(payload, limit)
        except (DecodeError, zstandard.ZstdError, orjson.JSONDecodeError) as exc:
            quarantine.append(_bad(offset, f"not an ExportTraceServiceRequest: {exc}", payload))
            continue
        messages.append(message)
        numbers.append(number)
        size += len(message.data)
        if size >= BLOCK_BYTES:
            yield _frame_block(messages, numbers, quarantine, readers)
            messages, numbers, size = [], [], 0
            trim_heap()  # what the block left free goes back to the system (traceq/spill.py)
    if messages:
        yield _frame_block(messages, numbers, quarantine, readers)


@dataclass
class _Readers:
    """The file's JSON readers (for what the protobuf reader declines) and whether the
    protobuf reader still takes its blocks: not after one it could not read, or one whose
    messages it declined past MAX_POLARS_SHARE."""

    json: Readers
    native: bool = True
    declined: Readers = field(init=False)

    def __post_init__(self) -> None:
        self.declined = Readers(self.json.token_event, arrow=False)


def _frame_block(
    messages: list[_Message], numbers: list[int], quarantine: Quarantine, readers: _Readers
) -> tuple[pl.DataFrame, pl.DataFrame]:
    number = np.asarray(numbers, dtype=np.int64)
    native = _native(messages, readers) if otlp_json.ARROW_READER and readers.native else None
    if native is None:
        lines = [m.line() for m in messages]
        return _numbered(spans_of_lines(_joined(lines), 1, quarantine, readers.json), number)
    frame, rest = native
    frame = frame.with_columns(_line=pl.Series(number[frame["_row"].to_numpy()]))
    if not len(rest):
        return frame.select(SPAN_FRAME.names()), pl.DataFrame(schema={"_line": pl.Int64})
    lines = [messages[i].line() for i in rest.tolist()]
    more, no_key = _numbered(
        spans_of_lines(_joined(lines), 1, quarantine, readers.declined), number[rest]
    )
    frame = pl.concat([frame.select(SPAN_FRAME.names()), more]).sort("_line", maintain_order=True)
    return frame, no_key


def _native(messages: list[_Message], readers: _Readers) -> tuple[pl.DataFrame, np.ndarray] | None:
    """The protobuf reader's span frame (`_row`: the message's index in the block) and the
    messages it leaves to the JSON readers (JSON messages among them); None when it leaves
    the block whole."""
    binary = np.array([not m.json for m in messages])
    index = np.flatnonzero(binary)
    try:
        token_event = readers.json.token_event
        untexted = None if token_event in TOKEN_LEVEL_EVENTS else token_event
        table, declined = proto_arrow.to_table([messages[i].data for i in index.tolist()], untexted)
    except (WireError, OverflowError):
        readers.native = False
        return None
    spans = otlp_arrow.to_spans(table, readers.json.token_event)
    if spans is None:
        readers.native = False
        return None
    declined = np.union1d(declined, spans.polars_rows)
    if len(declined) > MAX_POLARS_SHARE * max(len(index), 1):
        readers.native = False
        return None
    frame = spans.frame
    if len(declined):
        frame = frame.filter(~pl.col("_row").is_in(pl.Series(declined).implode()))
    frame = frame.with_columns(_row=pl.Series(index[frame["_row"].to_numpy()], dtype=pl.Int64))
    rest = np.union1d(index[declined], np.flatnonzero(~binary))
    return frame, rest


def _joined(lines: list[bytes]) -> bytes:
    return b"\n".join(lines) + b"\n"


def _numbered(
    got: tuple[pl.DataFrame, pl.DataFrame], number: np.ndarray
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Message numbers, not line numbers, locate records in a binary file."""
    frame, no_key = got
    message = pl.Series(number, dtype=pl.Int64)
    return (
        frame.with_columns(_line=message.gather(frame["_line"] - 1)),
        no_key.with_columns(_line=message.gather(no_key["_line"] - 1)),
    )
