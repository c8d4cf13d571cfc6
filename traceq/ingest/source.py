"""One input file: its content hash, transparent decompression and a sniffable head."""

from __future__ import annotations

import gzip
import hashlib
import io
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import BinaryIO

import zstandard

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
HEAD_BYTES = 64 * 1024


class InputError(Exception):
    """An input that cannot be read at all (exit code 2): missing, empty, unknown format."""


@dataclass
class Source:
    path: Path
    options: dict = field(default_factory=dict)

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

    def open(self) -> BinaryIO:
        """The decompressed content as a binary stream."""
        raw = open(self.path, "rb")  # noqa: SIM115 - handed to the caller
        if self.compression == "gzip":
            return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]
        if self.compression == "zstd":
            reader = zstandard.ZstdDecompressor().stream_reader(raw, closefd=True)
            return io.BufferedReader(reader)  # type: ignore[arg-type]
        return raw

    @cached_property
    def head(self) -> bytes:
        """The first decompressed bytes, for format sniffing."""
        try:
            with self.open() as fh:
                return fh.read(HEAD_BYTES)
        except (OSError, EOFError, zstandard.ZstdError) as exc:
            msg = f"{self.path}: cannot decompress ({exc})"
            raise InputError(msg) from exc
