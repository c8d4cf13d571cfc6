"""A pytest plugin that adds up the CPU seconds of each test file: this process's plus its
finished children's (`traceq` subprocesses, the app's server), setup and teardown included.
Unlike wall time it hardly moves with the machine's load, so two runs side by side compare.

    CPUPROF_OUT=cpu.json PYTHONPATH=.:bench python -m pytest -p suite_cpu

docs/PERFORMANCE.md ("Test suite time") holds the figures.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections import defaultdict
from collections.abc import Generator
from typing import Any

import pytest

_cpu: defaultdict[str, float] = defaultdict(float)
_wall: defaultdict[str, float] = defaultdict(float)


def _cpu_now() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Generator[None, None, None]:
    cpu, wall = _cpu_now(), time.perf_counter()
    yield
    path = item.nodeid.split("::")[0]
    _cpu[path] += _cpu_now() - cpu
    _wall[path] += time.perf_counter() - wall


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get("CPUPROF_OUT")
    if out:
        with open(out, "w") as f:
            json.dump({"cpu": _cpu, "wall": _wall}, f, indent=1)
