"""A dataset as an older traceq wrote it: without the rollups of its tokens (request_gaps,
gap_buckets; traceq/layout_rollups.py), so the views compute them from every chunk."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path

from traceq.schema import DERIVED


def without_rollups(dataset: Path, target: Path, sources: Iterable[str] | None = None) -> Path:
    """A copy of `dataset` whose manifest lists no rollup files (of `sources`, default all),
    those files deleted."""
    shutil.copytree(dataset, target)
    manifest = json.loads((target / "manifest.json").read_text())
    only = set(sources) if sources is not None else None
    for source in manifest["sources"]:
        if only is not None and source["source_id"] not in only:
            continue
        for table in DERIVED:
            for rel in source.get("files", {}).pop(table, []):
                (target / rel).unlink()
    (target / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return target
