"""A job's flow (runtime.dataflow: each, routed, union, collected) over the driver's own worker
processes (runtime.local_workers): what a task yields is spilled to a file of its own and read
from there by the task of its part, as Spark's shuffle does through its local directories."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pickle
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from pipelines.runtime.local_workers import LocalWorkers

T = TypeVar("T")


@dataclass(frozen=True)
class Spill:
    """What one task of a LocalFlow yielded: its items pickled one after another in one file,
    and per item its part, place and length (the driver holds these, never the items)."""

    path: str
    parts: np.ndarray  # int64
    starts: np.ndarray
    lengths: np.ndarray


# A frame of LocalFlow: the spills of its tasks.
LocalFrame = list[Spill]


def _spill(pairs: Iterable[tuple[int, Any]], directory: str) -> Spill:
    """In a worker: the (part, object) pairs written to a file of their own in `directory`."""
    parts: list[int] = []
    starts: list[int] = []
    lengths: list[int] = []
    path = os.path.join(directory, f"{uuid.uuid4().hex}.items")
    with open(path, "wb") as out:
        for part, obj in pairs:
            data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
            parts.append(part)
            starts.append(out.tell())
            lengths.append(len(data))
            out.write(data)
    return Spill(path, np.array(parts, np.int64), np.array(starts, np.int64), np.array(lengths, np.int64))


def _read(places: Sequence[tuple[str, int, int]]) -> Iterator[Any]:
    """The objects at (file, start, length) places, one at a time."""
    handles: dict[str, Any] = {}
    try:
        for path, start, length in places:
            if path not in handles:
                handles[path] = open(path, "rb")  # noqa: SIM115 (closed below, many at once)
            handle = handles[path]
            handle.seek(start)
            yield pickle.loads(handle.read(length))
    finally:
        for handle in handles.values():
            handle.close()


FLOW_PREFIX = "segpipe-flow-"  # a flow's spill directory under TMPDIR
# A file in it that the flow's process holds an exclusive lock on while it lives: the kernel lets
# go of the lock when that process dies, however it dies (SIGKILL, the OOM killer).
FLOW_OWNER = "owner.lock"


def _own(directory: str) -> int:
    """Lock the flow's owner file; it appears under its name already locked (made under another
    name, then renamed), so a sweep never finds it unlocked while its flow lives."""
    making = os.path.join(directory, f".{FLOW_OWNER}.{os.getpid()}")
    fd = os.open(making, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.rename(making, os.path.join(directory, FLOW_OWNER))
    return fd


def sweep_dead_flows(root: str) -> list[str]:
    """Remove the spill directories under `root` of flows whose process died without removing
    its own (a run killed with SIGKILL, or by the OOM killer): those whose owner file's lock can be
    taken. A directory without an owner file (one being made, or not a flow's) is left alone. The
    directories removed."""
    removed = []
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(root):
            if not entry.name.startswith(FLOW_PREFIX) or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                fd = os.open(os.path.join(entry.path, FLOW_OWNER), os.O_RDWR)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its flow lives
            finally:
                os.close(fd)
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
    return removed


class LocalFlow:
    """runtime.dataflow's operations (each, routed, union, collected) over the driver's worker
    processes. What a task yields is spilled to a file of its own under a directory of the flow
    (the system's temporary directory: TMPDIR), as Spark's shuffle writes to its local dirs, and
    read from there by the task of its part, so neither the driver nor a task holds more than
    Spark's would. A frame is read once (routed or collected); its files go then, and the
    directory when the flow closes, or, where its process was killed first, when the next flow
    starts (sweep_dead_flows)."""

    def __init__(self, local: LocalWorkers) -> None:
        self.local = local
        sweep_dead_flows(tempfile.gettempdir())
        self.directory = tempfile.mkdtemp(prefix=FLOW_PREFIX)
        self._owner = _own(self.directory)
        # Every task runs on this machine, and the first `cores` packs of an `each` at once.
        self.shared: str | None = self.directory

    def __enter__(self) -> LocalFlow:
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
        os.close(self._owner)

    def each(self, packs: Sequence[T], work: Callable[[T], Iterable[tuple[int, Any]]]) -> LocalFrame:
        directory = self.directory
        return self.local.map(lambda pack: _spill(work(pack), directory), packs)

    def routed(
        self, frame: LocalFrame, parts: int, work: Callable[[int, Iterator[Any]], Iterable[tuple[int, Any]]]
    ) -> LocalFrame:
        by_part: list[list[tuple[str, int, int]]] = [[] for _ in range(parts)]
        for spill in frame:
            for part, start, length in zip(
                spill.parts.tolist(), spill.starts.tolist(), spill.lengths.tolist(), strict=True
            ):
                by_part[part].append((spill.path, start, length))
        directory = self.directory

        def run(part_places: tuple[int, list[tuple[str, int, int]]]) -> Spill:
            part, places = part_places
            return _spill(work(part, _read(places)), directory)

        # Every part's task runs, also one no item is for (as dataflow.routed announces each part).
        out = self.local.map(run, list(enumerate(by_part)))
        _remove(frame)
        return out

    def union(self, frames: Sequence[LocalFrame]) -> LocalFrame:
        return [spill for frame in frames for spill in frame]

    def collected(self, frame: LocalFrame) -> list[tuple[int, Any]]:
        places = [
            (spill.path, start, length)
            for spill in frame
            for start, length in zip(spill.starts.tolist(), spill.lengths.tolist(), strict=True)
        ]
        parts = [part for spill in frame for part in spill.parts.tolist()]
        out = list(zip(parts, _read(places), strict=True))
        _remove(frame)
        return out


def _remove(frame: LocalFrame) -> None:
    for spill in frame:
        with contextlib.suppress(FileNotFoundError):
            os.remove(spill.path)
