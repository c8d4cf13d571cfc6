"""Reading a stream in bounded blocks of whole lines, shared by the line-oriented readers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import BinaryIO

import orjson


def iter_line_blocks(
    stream: BinaryIO,
    progress: Callable[[int], None],
    block_bytes: int,
    max_line_bytes: int | None = None,
) -> Iterator[tuple[bytes, int]]:
    """(block of whole lines, 1-based number of its first line), `block_bytes` read at a time.

    With `max_line_bytes`, a line still without its end past that size keeps only its head
    (the reader quarantines it anyway), so a file without newlines cannot exhaust memory.
    """
    carry = b""
    line_no = 1
    while chunk := stream.read(block_bytes):
        progress(len(chunk))
        data = carry + chunk if carry else chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            carry = data if max_line_bytes is None else data[: max_line_bytes + 1]
            continue
        block, carry = data[: cut + 1], data[cut + 1 :]
        yield block, line_no
        line_no += block.count(b"\n")
    if carry.strip():
        yield carry, line_no


def is_json(text: bytes) -> bool:
    """Whether `text` is one whole JSON value."""
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True
