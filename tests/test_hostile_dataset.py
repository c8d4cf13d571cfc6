"""The dataset folder is data, not instructions. traceq writes only into an empty
folder or a dataset, never reads or deletes a path outside it, never follows a link in it, and
leaves no `.staging` behind when the disk fills."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import traceq
from tests.otel_factory import MS, T0, RequestSpec, make_spans, write_otlp_json
from traceq.dataset import DatasetError


def _source(tmp_path: Path, prefix: str = "r", n: int = 3) -> Path:
    specs = [
        RequestSpec(f"{prefix}{i}", arrival=T0 + i * MS, attributes={"gen_ai.request.id": f"{i}"})
        for i in range(n)
    ]
    return write_otlp_json(make_spans(specs), tmp_path / f"{prefix}.jsonl")


def _cli(*args: str | Path, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "traceq", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        **kwargs,
    )


def test_output_into_a_folder_that_is_no_dataset_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "requests").mkdir(parents=True)
    (home / "requests" / "mine.parquet").write_bytes(b"the user's own file")
    (home / "notes.txt").write_text("keep me")
    result = _cli("ingest", _source(tmp_path), "-o", home)
    assert result.returncode == 2
    assert result.stderr.startswith("traceq: error: ") and result.stderr.count("\n") == 1
    assert "is not empty and is not a traceq dataset" in result.stderr
    assert (home / "requests" / "mine.parquet").read_bytes() == b"the user's own file"
    assert sorted(p.name for p in home.iterdir()) == ["notes.txt", "requests"]


def test_output_that_is_a_regular_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.write_text("x")
    result = _cli("ingest", _source(tmp_path), "-o", out)
    assert result.returncode == 2
    assert "exists and is not a folder" in result.stderr and "internal error" not in result.stderr


def _tamper(ds: Path, change) -> None:
    manifest = json.loads((ds / "manifest.json").read_text())
    change(manifest)
    (ds / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    "outside",
    [
        "/etc/hostname",
        "../victim/x.parquet",
        "requests/../../v",
        ["requests/day=2025-06-15/../../../victim/x.parquet"],
        ["requests/day=../../victim/x.parquet"],
        ["requests/day=2025-06-15/instance=../../../victim/x.parquet"],
    ],
)
def test_manifest_path_outside_the_dataset_is_never_read_or_deleted(
    tmp_path: Path, outside: str | list[str]
) -> None:
    ds = tmp_path / "ds"
    traceq.ingest([_source(tmp_path)], ds)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "x.parquet").write_bytes(b"not yours")

    def point_outside(manifest: dict) -> None:
        manifest["sources"][0]["files"]["requests"] = outside
        manifest["sources"][0]["status"] = "failed"  # the next ingest would delete its files

    _tamper(ds, point_outside)
    with pytest.raises(DatasetError, match="not inside the dataset"):
        traceq.open(ds)
    result = _cli("ingest", _source(tmp_path, "s"), "-o", ds)
    assert result.returncode == 2 and "not inside the dataset" in result.stderr
    assert (victim / "x.parquet").read_bytes() == b"not yours"


@pytest.mark.parametrize("name", [".staging", "requests"])
def test_symlinked_folder_in_the_dataset_is_refused(tmp_path: Path, name: str) -> None:
    ds = tmp_path / "ds"
    traceq.ingest([_source(tmp_path)], ds)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "old-123-1").mkdir(parents=True)  # looks like a dead ingest's scratch
    (elsewhere / "precious.parquet").write_bytes(b"x")
    target = ds / name
    if target.exists():
        for f in target.iterdir():
            f.rename(elsewhere / f.name)
        target.rmdir()
    target.symlink_to(elsewhere, target_is_directory=True)
    result = _cli("ingest", _source(tmp_path, "s"), "-o", ds)
    assert result.returncode == 2
    assert "is a symbolic link; traceq never follows links" in result.stderr
    assert (elsewhere / "old-123-1").is_dir() and (elsewhere / "precious.parquet").exists()


def test_manifest_without_sources(tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    traceq.ingest([_source(tmp_path)], ds)
    _tamper(ds, lambda m: m.pop("sources"))
    result = _cli("ingest", _source(tmp_path, "s"), "-o", ds)
    assert result.returncode == 2
    assert "is damaged: no list of `sources`" in result.stderr
    assert "internal error" not in result.stderr


def _small_file_limit() -> None:
    # Writes past 64 KiB fail with EFBIG, as writes on a full disk fail with ENOSPC.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))


def test_disk_full_leaves_no_staging(tmp_path: Path) -> None:
    big = _source(tmp_path, "big", n=3000)  # its staged Parquet files exceed 64 KiB
    ds = tmp_path / "ds"
    traceq.ingest([_source(tmp_path)], ds)
    before = (ds / "manifest.json").read_text()
    result = _cli("ingest", big, "-o", ds, preexec_fn=_small_file_limit)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and "file grew past the size limit" in result.stderr
    assert list((ds / ".staging").iterdir()) == []
    assert (ds / "manifest.json").read_text() == before  # the dataset is as it was
    assert traceq.ingest([big], ds)[0].status == "ingested"  # and works once there is room


def test_listed_file_that_links_outside_is_not_read(tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    traceq.ingest([_source(tmp_path)], ds)
    [entry] = json.loads((ds / "manifest.json").read_text())["sources"]
    listed = ds / entry["files"]["requests"][0]
    outside = tmp_path / "outside.parquet"
    listed.rename(outside)
    listed.symlink_to(outside)
    with pytest.raises(DatasetError, match="resolves outside the dataset"):
        traceq.open(ds)
    assert outside.exists()
