"""Which run owns an unpublished output, and whether it still lives.

A run writes a lock record (host, pid, the process's start time, run id) where its output is
staged: `_segpipe/LOCK` in a local staging directory, the `_segpipe/INCOMPLETE` marker on object
storage. The next run into the same destination reads it: a run of this host whose process is
gone (or is another process now holding the same pid) is dead, and what it left is removed; a live
run, or one on another host (which cannot be checked from here), is never touched, and the new
run is refused before any work.
"""

from __future__ import annotations

import json
import os
import posixpath
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

from pipelines.errors import RunInProgress
from segment_io.layout import INCOMPLETE, META_DIR
from segment_io.storage import Storage

LOCK = "LOCK"

__all__ = ["INCOMPLETE", "LOCK", "META_DIR"]


def _start_ticks(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot), None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])  # field 22; the name in () may hold spaces


@dataclass(frozen=True)
class RunLock:
    host: str
    pid: int
    started: int | None
    run_id: str

    @classmethod
    def mine(cls, run_id: str) -> RunLock:
        return cls(socket.gethostname(), os.getpid(), _start_ticks(os.getpid()), run_id)

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def parse(cls, data: bytes) -> RunLock | None:
        try:
            doc = json.loads(data)
            return cls(str(doc["host"]), int(doc["pid"]), doc.get("started"), str(doc["run_id"]))
        except (ValueError, KeyError, TypeError):
            return None

    def is_dead(self) -> bool:
        """Proved dead: on this host, and its pid is gone or is another process now."""
        if self.host != socket.gethostname():
            return False
        started = _start_ticks(self.pid)
        return started is None or (self.started is not None and started != self.started)

    def describe(self) -> str:
        return f"run {self.run_id} (pid {self.pid} on {self.host})"


@dataclass(frozen=True)
class Leftover:
    """The unpublished output of a run that did not finish: a staging directory, or (object
    storage) everything under the destination."""

    path: str
    size: int
    lock: RunLock | None


def read_lock(storage: Storage, path: str) -> RunLock | None:
    for name in (LOCK, INCOMPLETE):
        target = posixpath.join(path, META_DIR, name)
        if storage.exists(target):
            return RunLock.parse(storage.read(target))
    return None


def _size(storage: Storage, path: str) -> int:
    return sum(f.size for f in storage.walk_files(path))


def judge(storage: Storage, path: str, what: str) -> Leftover:
    """The leftover at `path` if its run is proved dead; refuses (RunInProgress) otherwise."""
    lock = read_lock(storage, path)
    size = _size(storage, path)
    if lock is None and size == 0:
        return Leftover(path, 0, None)  # a run that died before writing its lock: nothing in it
    if lock is None:
        raise RunInProgress(f"{what} {path} holds no readable run lock; remove it if no run is writing it")
    if not lock.is_dead():
        raise RunInProgress(
            f"{what} {path} belongs to {lock.describe()}, which may still be running; "
            "wait for it, or remove the directory if it is not"
        )
    return Leftover(path, size, lock)


@contextmanager
def held(storage: Storage, path: str, what: str, run_id: str) -> Iterator[RunLock]:
    """The lock file at `path` held by this run for the block: taken where there is none, or where
    its run is proved dead; refused (RunInProgress) where another run may still hold it."""
    mine = RunLock.mine(run_id)
    while True:
        try:
            storage.create_exclusive(path, mine.to_bytes())
            break
        except FileExistsError:
            other = RunLock.parse(storage.read(path))
            if other is None or not other.is_dead():
                holder = other.describe() if other is not None else "a run whose lock does not parse"
                raise RunInProgress(
                    f"{what} is held by {holder} ({storage.url(path)}), which may still be running; "
                    "wait for it, or remove the lock file if it is not"
                ) from None
            storage.remove(path)  # a dead run's: its work is resumed by this one
    try:
        yield mine
    finally:
        storage.remove(path)
