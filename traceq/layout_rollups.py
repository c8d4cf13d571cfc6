"""The rollups of a source's chunks, written beside its `tokens` when they are laid out
(traceq/layout.py): `request_gaps` (per request id and view: its chunk gaps summarised) and
`gap_buckets` (per view and bucket of `tokens.gap_ns`: count, min, max, sum), from the SQL of
`traceq/sql/layout_rollups.sql`. The views read them instead of every chunk
(traceq/sql/rollups.sql `_request_gaps`, traceq/sql/views.sql `_tbt_stats`).

Each piece of the `tokens` sort is summarised from its file as soon as it is written, so the
grouped pass holds one piece's gaps (at most `TOKENS_PIECE_ROWS`), never the source's. A
source whose chunks the views would pick other than by their request rows (a chunk with no
`requests` row of the same id and view) gets no rollups: the views compute its figures from
`tokens`, as for a dataset written before the rollups.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from traceq.sql import load


class Rollups:
    """The rollups of one source, piece by piece (`add`), then written whole (`finish`)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, folder: Path) -> None:
        self.con = con
        self.folder = folder
        self._pieces: list[Path] = []
        con.execute(load("gap_bucket"))
        (
            self._setup,
            self._request_gaps,
            self._buckets,
            self._check,
            self._write_buckets,
            self._write_request_gaps,
        ) = con.extract_statements(load("layout_rollups"))
        con.execute(self._setup)

    def add(self, piece: Path) -> None:
        """Summarise one piece of `tokens`, read from its file as written."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.con.read_parquet(str(piece)).create_view("_piece_tokens")
        path = self.folder / f"request_gaps.{len(self._pieces)}.parquet"
        self.con.execute(self._request_gaps, {"path": str(path)})
        self.con.execute(self._buckets)
        self._pieces.append(path)

    def finish(self, name: str) -> dict[str, dict[str, Path]]:
        """table → {path in the dataset: file}, or nothing when the source gets no rollups."""
        if not self._pieces:
            return {}
        self.con.read_parquet([str(p) for p in self._pieces]).create_view("_request_gaps_pieces")
        [(orphans, overflows)] = self.con.execute(self._check).fetchall()
        out: dict[str, dict[str, Path]] = {}
        if orphans == 0 and overflows == 0:
            for table, statement in (
                ("gap_buckets", self._write_buckets),
                ("request_gaps", self._write_request_gaps),
            ):
                path = self.folder / f"{table}.parquet"
                self.con.execute(statement, {"path": str(path)})
                out[table] = {f"{table}/{name}.parquet": path}
        for piece in self._pieces:
            piece.unlink()
        return out
