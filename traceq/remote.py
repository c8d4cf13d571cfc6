"""A dataset read where it lies in object storage: `s3://bucket/run.tq`, `gs://…`, `az://…`.

`traceq ingest` writes a local folder; copied as it is to a bucket (docs/SCALE.md, "Object
storage"), the same folder is read by its URL wherever traceq takes a dataset (`traceq.open`,
`Session`, `traceq sql`, `diagnose`, `report`, the app, `traceq.spark.register`). The
manifest is read from the bucket and stays the only list of files; each listed path is joined
to the URL, as `Dataset.path_of` joins it to the folder, after the same check of its shape (no
`..`, nothing absolute: traceq/layout.py).

The bytes come through [fsspec](https://filesystem-spec.readthedocs.io): `s3fs` for `s3://`
(`pip install 'traceq[s3]'`), `gcsfs` for `gs://`, `adlfs` for `az://`, configured as those
libraries are (for S3 the usual AWS variables: `AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT_URL`, a
profile...). DuckDB reads the Parquet files through the same filesystem object
(`register_filesystem`), so no DuckDB extension is downloaded at run time, and the connection
is locked to the listed files as for a local folder (traceq/db.py).

>>> s = Session("s3://traces/fleet/run.tq")                          # doctest: +SKIP
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Any

from traceq import pick
from traceq.dataset import (
    MANIFEST,
    Dataset,
    DatasetError,
    checked_manifest,
    is_url,
    listed_files,
    listed_rel,
)

EXTRA = {"s3": "pip install 'traceq[s3]'", "gs": "pip install gcsfs", "az": "pip install adlfs"}


class RemoteDataset:
    """A dataset in object storage, read-only: the reading half of `Dataset`."""

    def __init__(self, url: str, **storage_options: Any) -> None:
        self.root = url.rstrip("/")
        protocol = self.root.split("://", 1)[0].lower()
        try:
            import fsspec

            # a filesystem of its own: fsspec's cached instance would keep the endpoint and
            # credentials of the first dataset opened in this process
            self.filesystem, self._path = fsspec.core.url_to_fs(
                self.root, skip_instance_cache=True, **storage_options
            )
        except ImportError as exc:
            hint = EXTRA.get(protocol, f"install fsspec's filesystem for {protocol}://")
            msg = f"cannot read {self.root}: {exc}; {hint}"
            raise DatasetError(msg) from exc
        except (ValueError, TypeError) as exc:  # fsspec knows no such protocol
            msg = f"cannot read {self.root}: {exc}"
            raise DatasetError(msg) from exc
        _remember_info(self.filesystem)
        _exact_reads(self.filesystem)
        self._manifest_url = f"{self.root}/{MANIFEST}"
        self._text = self._read_manifest()

    def _read_manifest(self) -> str:
        try:
            data = self.filesystem.cat_file(f"{self._path}/{MANIFEST}")
        except FileNotFoundError as exc:
            msg = f"{self.root} is not a traceq dataset (no {MANIFEST})"
            raise DatasetError(msg) from exc
        except Exception as exc:  # the store's own errors: credentials, network, permission
            msg = f"cannot read {self._manifest_url}: {type(exc).__name__}: {exc}"
            raise DatasetError(msg) from exc
        try:
            return bytes(data).decode()
        except UnicodeDecodeError as exc:
            msg = f"cannot read {self._manifest_url}: {exc}"
            raise DatasetError(msg) from exc

    def manifest(self) -> dict[str, Any]:
        """The manifest as it was when the dataset was opened (checked as a local one)."""
        return checked_manifest(self._text, self._manifest_url)

    def path_of(self, rel: Any) -> str:
        """The URL of the listed file `rel`, refused unless it has a dataset file's shape."""
        return f"{self.root}/{listed_rel(rel, self._manifest_url)}"

    def table_files(self, table: str) -> list[str]:
        return [self.path_of(rel) for rel in listed_files(self.manifest(), table)]

    def pick_file(self, entry: dict[str, Any]) -> str | None:
        """The settled request pick's URL (traceq/pick.py) if the file is there, else None."""
        return self.stored_file(pick.file_of(Path(), entry).as_posix())

    def stored_file(self, rel: str) -> str | None:
        """The URL of a file traceq names itself (the request pick, the stored KPIs), not
        one read from the manifest, if it is there, else None."""
        try:
            found = self.filesystem.exists(f"{self._path}/{rel}")
        except Exception as exc:  # the store's own errors, as in _read_manifest
            msg = f"cannot read {self.root}/{rel}: {type(exc).__name__}: {exc}"
            raise DatasetError(msg) from exc
        return f"{self.root}/{rel}" if found else None


def _remember_info(filesystem: Any) -> None:
    """Answer `filesystem`'s `info` (and so its `size`, `exists`, `modified`) once a path for
    the life of this filesystem, one dataset opened once. DuckDB asks a file's size and
    modification time at each open of it, and a session's views open the same files again and
    again: one request to the store each, 573 to open a session on the 100 k-request dataset,
    5 now (docs/PERFORMANCE.md, "Object storage: requests and bytes"). The files a manifest
    lists are uploaded before it and never rewritten (docs/SCALE.md, "Object storage"), and a
    session reads the manifest once, so the first answer holds. A path that was not found is
    asked again. s3fs, gcsfs and adlfs are asynchronous: their `info` runs `_info`."""
    from fsspec.asyn import sync_wrapper

    ask = getattr(filesystem, "_info", None)
    if not inspect.iscoroutinefunction(ask):
        return  # not one of those: asked as it is
    known: dict[str, Any] = {}

    async def remembered(path: str, *args: Any, **kwargs: Any) -> Any:
        # a refresh or a version (s3fs `version_id`, gcsfs `generation`): the store's answer
        if any(v for k, v in kwargs.items() if k not in ("bucket", "key")):
            return await ask(path, *args, **kwargs)
        key = filesystem._strip_protocol(path)
        if key not in known:
            known[key] = await ask(path, *args, **kwargs)
        return known[key]

    filesystem._info = remembered
    filesystem.info = sync_wrapper(remembered, obj=filesystem)


def _exact_reads(filesystem: Any) -> None:
    """Open files for reading with no read-ahead cache: each read fetches the bytes DuckDB
    asks for (the footers and column chunks it planned) and nothing more. With fsspec's
    default (s3fs: a 50 MB read-ahead block) a read fetched from its chunk to the end of the
    file: on the 100 k-request dataset (38 MB), a one-minute query fetched 29 MB instead of
    3.7, `kpi_latency` 47 MB instead of 6.2 (docs/PERFORMANCE.md, "Object storage: requests and
    bytes")."""
    open_file = filesystem.open

    def exact(path: str, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        if "r" in mode:
            kwargs.setdefault("cache_type", "none")
        return open_file(path, mode, *args, **kwargs)

    filesystem.open = exact


AnyDataset = Dataset | RemoteDataset
__all__ = ["AnyDataset", "RemoteDataset", "is_url", "open_dataset"]


def open_dataset(location: str | os.PathLike[str] | AnyDataset) -> AnyDataset:
    """`location` as a dataset to read: a `Dataset` or `RemoteDataset` as it is, a URL as a
    `RemoteDataset`, anything else as a local folder."""
    if isinstance(location, (Dataset, RemoteDataset)):
        return location
    if is_url(location):
        return RemoteDataset(str(location))
    return Dataset(location)
