"""Private spill directories that do not outlive their process.

A `Session` (traceq/session.py) spills to a directory of its own and removes it on close. A
process that is killed (SIGKILL, the OOM killer, a `timeout -s KILL`) never closes, and DuckDB's
spill files stay behind: a 1 M-request query stopped by a timeout once left 29 GB in /tmp. So
each directory carries an `owner` file naming its host, process id and that process's start
time, and creating a new one removes the siblings whose owner is gone. A directory without an
owner file, or owned on another host (a shared /tmp), is left alone.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from pathlib import Path

PREFIX = "traceq-duckdb-"
"""Name prefix of a session's spill directory in the system temp directory."""

OWNER_FILE = "owner"


def private_temp_dir(parent: str | os.PathLike[str] | None = None) -> Path:
    """Create a spill directory owned by this process, after sweeping dead owners' ones.

    >>> import tempfile
    >>> d = private_temp_dir(tempfile.mkdtemp())
    >>> d.name.startswith(PREFIX), (d / OWNER_FILE).is_file()
    (True, True)
    """
    root = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    sweep_stale(root)
    path = Path(tempfile.mkdtemp(prefix=PREFIX, dir=root))
    (path / OWNER_FILE).write_text(_identity(os.getpid()) or "", encoding="utf-8")
    return path


def sweep_stale(root: Path) -> list[Path]:
    """Remove the `traceq-duckdb-*` directories under `root` whose owning process is gone;
    return them. Never raises: a directory that cannot be read or removed is skipped."""
    removed: list[Path] = []
    try:
        candidates = list(root.glob(PREFIX + "*"))
    except OSError:
        return removed
    for path in candidates:
        if _stale(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _stale(path: Path) -> bool:
    try:
        owner = (path / OWNER_FILE).read_text(encoding="utf-8").split()
    except (OSError, UnicodeDecodeError):
        return False
    if len(owner) != 3 or owner[0] != socket.gethostname() or not owner[1].isdigit():
        return False
    pid = int(owner[1])
    if pid == os.getpid():
        return False
    return _identity(pid) != " ".join(owner)


def _identity(pid: int) -> str | None:
    """`host pid start-time` of a live process, None when there is none. The start time
    (Linux: field 22 of /proc/PID/stat) tells a reused pid from the owner; elsewhere a live
    pid counts as the owner."""
    stat = Path(f"/proc/{pid}/stat")
    start: str | None
    try:
        # The command name (field 2) may hold spaces: count fields after its closing paren.
        start = stat.read_text(encoding="utf-8").rsplit(")", 1)[1].split()[19]
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None
        start = _alive_elsewhere(pid)
    except (OSError, IndexError):
        start = _alive_elsewhere(pid)
    return None if start is None else f"{socket.gethostname()} {pid} {start}"


def _alive_elsewhere(pid: int) -> str | None:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except OSError:
        pass
    return "0"
