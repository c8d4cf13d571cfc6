"""OTLP protobuf files: one serialised `ExportTraceServiceRequest`, or the Collector file
exporter's `format: proto` stream, where each message is preceded by its length as a 4-byte
big-endian unsigned integer (`exporter/fileexporter/file_writer.go`, exportMessageAsBuffer).
With the exporter's legacy `compression: zstd` each framed message is zstd-compressed on its
own (JSON messages too); with native compression the whole stream is (see source.py).

Messages are decoded by protobuf's C parser and mapped to OTLP/JSON documents
(proto_shape.py, in Python per span and per event), which then take the same path as the JSON
lines (otlp_json.py: pyarrow's reader, polars' for what it leaves).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Iterator
from typing import BinaryIO

import orjson
import polars as pl
import zstandard
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from traceq.ingest.blocks import MAX_LINE_BYTES, cap_of, read_whole
from traceq.ingest.otel.otlp_json import (
    BLOCK_BYTES,
    TOKEN_EVENT,
    Quarantine,
    Readers,
    spans_of_lines,
)
from traceq.ingest.otel.proto_shape import as_document
from traceq.ingest.source import ZSTD_MAGIC
from traceq.schema import RAW_LIMIT
from traceq.spill import trim_heap

RESOURCE_SPANS_TAG = 0x0A  # field 1 (resource_spans), wire type 2


def looks_framed(head: bytes) -> bool:
    """A length-prefixed stream: a plausible length followed by a message or zstd frame."""
    if len(head) < 5:
        return False
    (length,) = struct.unpack(">I", head[:4])
    return 0 < length < (1 << 31) and (head[4] == RESOURCE_SPANS_TAG or head[4:8] == ZSTD_MAGIC)


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


def _to_json_line(payload: bytes, limit: int) -> bytes:
    if payload.startswith(ZSTD_MAGIC):
        payload = _unzstd(payload, limit)
    if payload.lstrip()[:1] == b"{":  # a JSON message in a framed (compressed) stream
        return orjson.dumps(orjson.loads(payload))
    message = ExportTraceServiceRequest.FromString(payload)
    return orjson.dumps(as_document(message))


def iter_span_frames(
    stream: BinaryIO,
    quarantine: Quarantine,
    progress: Callable[[int], None],
    token_event: str = TOKEN_EVENT,
) -> Iterator[tuple[pl.DataFrame, pl.DataFrame]]:
    """Span frames of a protobuf file, a block of messages at a time."""
    head = stream.peek(8)[:8] if hasattr(stream, "peek") else b""
    if looks_framed(head):
        messages: Iterator[tuple[int, bytes]] = _frames(stream, quarantine)
    else:
        whole = read_whole(stream, lambda _: None)
        messages = iter([] if whole is None else [(0, whole)])
    cap = cap_of(stream)
    limit = cap.max_bytes if cap else MAX_LINE_BYTES
    readers = Readers(token_event)
    lines: list[bytes] = []
    numbers: list[int] = []
    size = 0
    for number, (offset, payload) in enumerate(messages, start=1):
        progress(len(payload) + 4)
        try:
            line = _to_json_line(payload, limit)
        except (DecodeError, zstandard.ZstdError, orjson.JSONDecodeError) as exc:
            quarantine.append(_bad(offset, f"not an ExportTraceServiceRequest: {exc}", payload))
            continue
        lines.append(line)
        numbers.append(number)
        size += len(line)
        if size >= BLOCK_BYTES:
            yield _frame_block(lines, numbers, quarantine, readers)
            lines, numbers, size = [], [], 0
            trim_heap()  # what the block left free goes back to the system (traceq/spill.py)
    if lines:
        yield _frame_block(lines, numbers, quarantine, readers)


def _frame_block(
    lines: list[bytes], numbers: list[int], quarantine: Quarantine, readers: Readers
) -> tuple[pl.DataFrame, pl.DataFrame]:
    frame, no_key = spans_of_lines(b"\n".join(lines) + b"\n", 1, quarantine, readers)
    # Message numbers, not line numbers, locate records in a binary file.
    message = pl.Series(numbers, dtype=pl.Int64)
    return (
        frame.with_columns(_line=message.gather(frame["_line"] - 1)),
        no_key.with_columns(_line=message.gather(no_key["_line"] - 1)),
    )
