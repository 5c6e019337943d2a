"""Executed on workers: one segment's files uploaded to the remote tier and read back."""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.jobs.tier.throttle import Throttle
from pipelines.runtime.faults import fault_point
from segment_io.remote.manifest import RemoteSegment
from segment_io.remote.tier import RemoteTier, SegmentUpload
from segment_io.storage import open_storage


@dataclass(frozen=True)
class UploadTask:
    partition_index: int
    source_url: str  # the local log directory's storage
    upload: SegmentUpload
    size: int  # bytes to send (what packs tasks)


def run_uploads(
    pack: list[UploadTask], remote_url: str, rate: float | None
) -> list[tuple[int, RemoteSegment]]:
    tier = RemoteTier.open(remote_url)
    throttle = Throttle(rate) if rate else None
    out = []
    for task in pack:
        source, _ = open_storage(task.source_url)
        out.append((task.partition_index, tier.upload(source, task.upload, throttle)))
        fault_point("mid-upload")
    return out
