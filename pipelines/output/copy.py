"""Whole segments copied byte for byte (log and indexes) into a staging area, in parallel."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from segment_io.layout import SegmentFiles
from segment_io.storage import Storage, open_storage, transfer


@dataclass(frozen=True)
class CopyTask:
    src_url: str
    src_path: str
    dst_path: str  # relative to the staging root
    mtime_ms: int
    size: int
    link: bool = False  # a hard link instead of a copy (both local, one file system)


def segment_copies(dir_name: str, files: SegmentFiles, src_url: str, link: bool = False) -> list[CopyTask]:
    """One task per file of a segment, into `dir_name` under the Kafka names of its files."""
    return [
        CopyTask(src_url, info.path, posixpath.join(dir_name, info.name), info.mtime_ms, info.size, link)
        for info in (files.log, files.index, files.timeindex, files.txnindex)
        if info is not None
    ]


def run_copies(pack: list[CopyTask], staging_url: str) -> list[None]:
    """Executed on a worker: copy a pack of files into the staging area, keeping their mtimes (a
    task with no results)."""
    dst, root = open_storage(staging_url)
    sources: dict[str, Storage] = {}
    for task in pack:
        if task.src_url not in sources:
            sources[task.src_url] = open_storage(task.src_url)[0]
        src = sources[task.src_url]
        if task.link:
            dst.link(task.src_path, posixpath.join(root, task.dst_path))
        else:
            transfer(src, task.src_path, dst, posixpath.join(root, task.dst_path), task.mtime_ms)
    return []
