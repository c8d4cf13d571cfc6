"""JSON lines read block by block with polars' NDJSON reader and a fixed schema.

A block polars rejects (bad line, NaN, a field of the wrong type) is re-read line by line so
that only the bad lines go to the quarantine; memory stays bounded by the block size.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import BinaryIO

import orjson
import polars as pl

from traceq.ingest.loadtest.common import Run

BLOCK_BYTES = 16 << 20


def iter_frames(
    stream: BinaryIO, schema: pl.Schema, run: Run, progress: Callable[[int], None]
) -> Iterator[tuple[pl.DataFrame, bytes, int]]:
    """(frame with a 1-based `_line` column, the block's bytes, its first line number) per
    block of whole lines, reading BLOCK_BYTES at a time."""
    carry = b""
    line_no = 1
    while chunk := stream.read(BLOCK_BYTES):
        progress(len(chunk))
        data = carry + chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            carry = data
            continue
        block, carry = data[: cut + 1], data[cut + 1 :]
        yield _block(block, line_no, schema, run), block, line_no
        line_no += block.count(b"\n")
    if carry.strip():
        yield _block(carry, line_no, schema, run), carry, line_no


def _block(block: bytes, first: int, schema: pl.Schema, run: Run) -> pl.DataFrame:
    lines = block.split(b"\n")
    if all(line.strip() for line in lines[:-1]):
        try:
            frame = pl.read_ndjson(io.BytesIO(block), schema=schema)
            if frame.height == len(lines) - (not lines[-1].strip()):
                return frame.with_row_index("_line", offset=first).cast({"_line": pl.Int64})
        except Exception:  # polars raises several error types for malformed JSON
            pass
    keep: list[bytes] = []
    numbers: list[int] = []
    for offset, line in enumerate(lines):
        if not line.strip():
            continue
        number = first + offset
        try:
            parsed = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            cut = line.strip().startswith(b"{") and not line.strip().endswith(b"}")
            reason = "truncated JSON line" if cut else f"not valid JSON (NaN?): {exc}"
            run.reject(f"line {number}", reason, line)
            continue
        if not isinstance(parsed, dict):
            run.reject(f"line {number}", "not a JSON object", line)
            continue
        try:
            pl.read_ndjson(io.BytesIO(line), schema=schema)
        except Exception as exc:
            run.reject(f"line {number}", f"fields of unexpected types: {str(exc)[:160]}", line)
            continue
        keep.append(line)
        numbers.append(number)
    if not keep:
        return pl.DataFrame(schema={"_line": pl.Int64, **schema})
    frame = pl.read_ndjson(io.BytesIO(b"\n".join(keep)), schema=schema)
    return frame.with_columns(_line=pl.Series(numbers, dtype=pl.Int64)).select(
        "_line", *schema.names()
    )
