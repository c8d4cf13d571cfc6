"""One input file: its content hash, transparent decompression and a sniffable head."""

from __future__ import annotations

import gzip
import hashlib
import io
import zlib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import BinaryIO

import zstandard

from traceq.ingest.blocks import LineCap

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
HEAD_BYTES = 64 * 1024
UTF8_BOM = b"\xef\xbb\xbf"
"""Skipped at the start of the decompressed content: Windows tools (PowerShell's `Out-File`,
Notepad) write it in front of a log or CSV, where it hid the first line or header from every
text reader (an nvidia-smi dmon file was unrecognised). No binary input starts with it."""
READ_BYTES = 16 * 1024


class InputError(Exception):
    """An input that cannot be read at all (exit code 2): missing, empty, unknown format."""


DECOMPRESS_ERRORS = (OSError, EOFError, zlib.error, zstandard.ZstdError)


class _Guarded(io.RawIOBase):
    """A decompressing stream whose corruption ends the stream instead of raising.

    Records read before the damage are kept; the driver quarantines the rest using `error`.
    """

    def __init__(self, inner: BinaryIO) -> None:
        self.inner = inner
        self.error: str | None = None
        self.offset = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        if self.error:
            return 0
        try:
            # Small reads: a decompressor that hits damage loses the data of the failing call.
            data = self.inner.read(min(len(buffer), READ_BYTES))
        except DECOMPRESS_ERRORS as exc:
            at = self.offset
            self.error = f"compressed data is corrupt or truncated after {at} bytes ({exc})"
            return 0
        buffer[: len(data)] = data
        self.offset += len(data)
        return len(data)

    def close(self) -> None:
        self.inner.close()
        super().close()


@dataclass
class Source:
    path: Path
    errors: list[str] = field(default_factory=list)
    cap: LineCap = field(default_factory=LineCap)
    """The longest line / document readers may hold; the over-long ones are listed in it."""

    @cached_property
    def size(self) -> int:
        return self.path.stat().st_size

    @cached_property
    def content_hash(self) -> str:
        """sha256 of the file's bytes as stored (the re-ingest key)."""
        digest = hashlib.sha256()
        with open(self.path, "rb") as fh:
            while chunk := fh.read(1 << 22):
                digest.update(chunk)
        return digest.hexdigest()

    def prefix_hash(self, n: int) -> str:
        """sha256 of the file's first `n` bytes as stored (recognises a file that grew)."""
        digest = hashlib.sha256()
        with open(self.path, "rb") as fh:
            while n > 0 and (chunk := fh.read(min(n, 1 << 22))):
                digest.update(chunk)
                n -= len(chunk)
        return digest.hexdigest()

    @property
    def source_id(self) -> str:
        return self.content_hash[:16]

    @cached_property
    def compression(self) -> str | None:
        with open(self.path, "rb") as fh:
            magic = fh.read(4)
        if magic.startswith(GZIP_MAGIC):
            return "gzip"
        if magic == ZSTD_MAGIC:
            return "zstd"
        return None

    def _open_raw(self) -> BinaryIO:
        raw = open(self.path, "rb")  # noqa: SIM115 - handed to the caller
        if self.compression == "gzip":
            return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]
        if self.compression == "zstd":
            return zstandard.ZstdDecompressor().stream_reader(raw, closefd=True)  # type: ignore[return-value]
        return raw

    def open(self) -> BinaryIO:
        """The decompressed content as a buffered binary stream (with `peek`).

        Damage in compressed data ends the stream early and is recorded in `errors`. The
        stream carries `cap` (traceq/ingest/blocks.py), which bounds what a reader holds.
        """
        if self.compression is None:
            raw = self._open_raw()
            raw.cap = self.cap  # type: ignore[attr-defined]
            return _past_bom(raw)
        guarded = _Guarded(self._open_raw())
        stream = io.BufferedReader(guarded, buffer_size=1 << 20)
        original_close = stream.close

        def close() -> None:
            if guarded.error:
                self.errors.append(guarded.error)
            original_close()

        stream.close = close  # type: ignore[method-assign]
        stream.cap = self.cap  # type: ignore[attr-defined]
        return _past_bom(stream)  # type: ignore[arg-type]

    @cached_property
    def head(self) -> bytes:
        """The first decompressed bytes, for format sniffing."""
        try:
            guarded = _Guarded(self._open_raw())
        except DECOMPRESS_ERRORS as exc:
            msg = f"{self.path}: cannot decompress ({exc})"
            raise InputError(msg) from exc
        with io.BufferedReader(guarded) as fh:
            head = fh.read(HEAD_BYTES)
        if guarded.error and not head:
            msg = f"{self.path}: cannot decompress ({guarded.error})"
            raise InputError(msg)
        return head.removeprefix(UTF8_BOM)


def _past_bom(stream: BinaryIO) -> BinaryIO:
    """`stream` (buffered, with `peek`) past a leading `UTF8_BOM`."""
    if stream.peek(len(UTF8_BOM))[: len(UTF8_BOM)] == UTF8_BOM:  # type: ignore[attr-defined]
        stream.read(len(UTF8_BOM))
    return stream
