"""Reading one block ahead: a reader's next block is parsed on a worker thread while the
ingest driver splits and writes the one before (traceq/ingest/otel/__init__.py).

pyarrow's JSON parse and polars' flatten spend most of their time outside the GIL, as do the
driver's polars split and Parquet writes, so the two overlap on two cores (the numpy decode of
protobuf is many small calls that hold it, and overlaps less). The reader runs only on the
worker, one block at a time; what it reports while it reads (quarantine rows, bytes read for the
progress bar) is handed to the caller's lists and callback on the caller's thread, with the
block it came with, so a Streamlit progress bar is never touched from another thread and
quarantine rows keep their order. At most one block is in flight beside the one being written:
the first pass's peak grows by one block's frame, not with the file.

>>> def reader(quarantine, progress):
...     for n in (3, 4):
...         progress(n)
...         quarantine.append({"reason": f"block {n}"})
...         yield n * 10
>>> seen, read = [], []
>>> list(read_ahead(reader, seen, read.append)), [r["reason"] for r in seen], read
([30, 40], ['block 3', 'block 4'], [3, 4])
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar, cast

T = TypeVar("T")
Quarantine = list[dict]
Reader = Callable[[Quarantine, Callable[[int], None]], Iterator[T]]

_END = object()


def read_ahead(
    reader: Reader[T], quarantine: Quarantine, progress: Callable[[int], None]
) -> Generator[T, None, None]:
    """The items of `reader(its quarantine, its progress)`, each read on a worker thread while
    the caller works on the one before; the reader's quarantine rows and progress come to
    `quarantine` and `progress` on the caller's thread, before the item they came with (the
    rows after its last item, before the end). An error of the reader is raised here."""
    rows: Quarantine = []
    read = [0]

    def count(n: int) -> None:
        read[0] += n

    items = reader(rows, count)

    def step() -> tuple[object, Quarantine, int]:
        item = next(items, _END)
        got, n = rows[:], read[0]
        rows.clear()
        read[0] = 0
        return item, got, n

    pool = ThreadPoolExecutor(1, thread_name_prefix="traceq-read-ahead")
    try:
        pending = pool.submit(step)
        while True:
            item, got, n = pending.result()
            quarantine += got
            if n:
                progress(n)
            if item is _END:
                return
            pending = pool.submit(step)
            yield cast(T, item)
    finally:
        pool.shutdown(wait=True)  # the block in flight ends before the stream closes
        if isinstance(items, Generator):
            items.close()
