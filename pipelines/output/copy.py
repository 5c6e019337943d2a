"""Whole segments copied byte for byte (log and indexes) into a staging area, in parallel."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from segment_io.layout import SegmentFiles
from segment_io.storage import Location, Place, transfer
from segment_io.storage.location import locate


@dataclass(frozen=True)
class CopyTask:
    src: Location  # the store `src_path` is on
    src_path: str
    dst_path: str  # relative to the staging root
    mtime_ms: int
    size: int
    link: bool = False  # a hard link instead of a copy (both local, one file system)

    def __post_init__(self) -> None:
        locate(self, "src")


def segment_copies(dir_name: str, files: SegmentFiles, src: Place, link: bool = False) -> list[CopyTask]:
    """One task per file of a segment, into `dir_name` under the Kafka names of its files."""
    src = Location.of(src)
    return [
        CopyTask(src, info.path, posixpath.join(dir_name, info.name), info.mtime_ms, info.size, link)
        for info in (files.log, files.index, files.timeindex, files.txnindex)
        if info is not None
    ]


def run_copies(pack: list[CopyTask], staging: Place) -> list[None]:
    """Executed on a worker: copy a pack of files into the staging area, keeping their mtimes (a
    task with no results)."""
    staging = Location.of(staging)
    dst, root = staging.storage, staging.path
    for task in pack:
        src = task.src.storage
        if task.link:
            dst.link(task.src_path, posixpath.join(root, task.dst_path))
        else:
            transfer(src, task.src_path, dst, posixpath.join(root, task.dst_path), task.mtime_ms)
    return []
