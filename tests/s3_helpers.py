"""An S3 endpoint for tests: moto's S3 server on a free localhost port, reached by the real
S3 client (s3fs) through the usual AWS variables, and a dataset folder copied into it as
docs/SCALE.md says (files first, the manifest last); and a log of the requests a dataset's
filesystem makes to it."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import s3fs
from moto.server import ThreadedMotoServer

from traceq.dataset import MANIFEST
from traceq.remote import RemoteDataset

BUCKET = "traces"


@contextmanager
def moto_s3() -> Iterator[s3fs.S3FileSystem]:
    """A running S3 server with the bucket `traces`, the AWS variables pointing at it."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    # moto keeps its buckets per process, not per server: start from none (another test file
    # run by the same pytest worker may have made them)
    urllib.request.urlopen(
        urllib.request.Request(f"http://{host}:{port}/moto-api/reset", method="POST")
    ).close()
    env = {
        "AWS_ACCESS_KEY_ID": "traceq-test",
        "AWS_SECRET_ACCESS_KEY": "traceq-test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
    }
    with pytest.MonkeyPatch.context() as mp:
        for name, value in env.items():
            mp.setenv(name, value)
        fs = s3fs.S3FileSystem(skip_instance_cache=True)
        fs.mkdir(BUCKET)
        try:
            yield fs
        finally:
            server.stop()


def upload(fs: s3fs.S3FileSystem, local: Path, key: str) -> str:
    """Copy the dataset folder to `s3://traces/<key>`: every file but hidden ones (`.lock`,
    `.staging`), then the manifest. Returns the URL."""
    for path in sorted(local.rglob("*")):
        rel = path.relative_to(local)
        if path.is_file() and path.name != MANIFEST and not rel.parts[0].startswith("."):
            fs.put_file(str(path), f"{BUCKET}/{key}/{rel.as_posix()}")
    fs.put_file(str(local / MANIFEST), f"{BUCKET}/{key}/{MANIFEST}")
    fs.invalidate_cache()
    return f"s3://{BUCKET}/{key}"


def store_calls(ds: RemoteDataset) -> list[tuple[str, str, str | None]]:
    """(method, key, byte range) of each request `ds` makes to the store from now on, e.g.
    `("get_object", "run.tq/tokens/...", "bytes=0-99")`."""
    calls: list[tuple[str, str, str | None]] = []
    call = ds.filesystem._call_s3

    async def counted(method, *args, **kwargs):
        calls.append((method, kwargs.get("Key"), kwargs.get("Range")))
        return await call(method, *args, **kwargs)

    ds.filesystem._call_s3 = counted
    return calls
