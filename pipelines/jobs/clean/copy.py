"""Segments that neither retention nor compaction touch are copied byte for byte, indexes too."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from pipelines.jobs.clean.plan import PartitionPlan
from segment_io.layout import SegmentFiles
from segment_io.storage import open_storage, transfer


@dataclass(frozen=True)
class CopyTask:
    src_url: str
    src_path: str
    dst_path: str  # relative to the staging root
    mtime_ms: int
    size: int


def copy_tasks(plans: list[PartitionPlan], files: dict[int, SegmentFiles], src_url: str) -> list[CopyTask]:
    """One task per file of every segment a plan copies (`files` by segment id)."""
    out = []
    for plan in plans:
        for sid in plan.copied:
            f = files[sid]
            for info in (f.log, f.index, f.timeindex, f.txnindex):
                if info is not None:
                    rel = posixpath.join(plan.tp.dir_name, info.name)
                    out.append(CopyTask(src_url, info.path, rel, info.mtime_ms, info.size))
    return out


def run_copies(pack: list[CopyTask], staging_url: str) -> None:
    """Executed on a worker: copy a pack of files into the staging area, keeping their mtimes."""
    dst, root = open_storage(staging_url)
    for task in pack:
        src, _ = open_storage(task.src_url)
        transfer(src, task.src_path, dst, posixpath.join(root, task.dst_path), task.mtime_ms)
