"""Segments of a scanned log directory uploaded to a remote tier, one Spark task per pack of
segments; every object is read back and checked (`RemoteTier.upload`). Used by `tier` (cold
segments) and by `clean --in-place` (a cleaned remote log's new segments)."""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.log.scanned import Scanned
from pipelines.output.throttle import Throttle, per_task
from pipelines.runtime.faults import fault_point
from pipelines.runtime.session import LazySpark
from pipelines.runtime.spark_handle import Spark
from pipelines.runtime.tasks import on_workers, spark_packs
from segment_io.checkpoints import parse_leader_epoch_checkpoint
from segment_io.layout import LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA, PartitionListing, segment_file_name
from segment_io.remote.manifest import RemoteSegment
from segment_io.remote.tier import RemoteTier, SegmentUpload
from segment_io.storage import Storage, open_storage

UPLOAD_TASKS_PER_CORE = 2
Epochs = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class UploadTask:
    key: int  # which group of uploads (a partition) the result belongs to
    source_url: str  # the log directory's storage
    upload: SegmentUpload
    size: int  # bytes to send (what packs tasks)


def partition_files(storage: Storage, part: PartitionListing | None) -> tuple[Epochs | None, str | None]:
    """A partition's leader-epoch checkpoint entries and partition.metadata, where present."""
    if part is None:
        return None, None
    files = {f.name: f for f in part.other_files}
    epochs = metadata = None
    if LEADER_EPOCH_CHECKPOINT in files:
        info = files[LEADER_EPOCH_CHECKPOINT]
        epochs = tuple(parse_leader_epoch_checkpoint(storage.read(info.path), info.path))
    if PARTITION_METADATA in files:
        metadata = storage.read(files[PARTITION_METADATA].path).decode()
    return epochs, metadata


def upload_tasks(
    scanned: Scanned, key: int, part: PartitionListing, chosen: list[tuple[int, int]]
) -> list[UploadTask]:
    """One task per chosen segment (scan id, end offset) of `part`: its log, indexes, the
    producer snapshot taken at its end (`<end + 1>.snapshot`, where there is one) and the leader
    epochs that start at or before its end."""
    snapshots = {f.name: f for f in part.snapshots}
    epochs, _ = partition_files(scanned.storage, part)
    tasks = []
    for segment_id, end_offset in chosen:
        files = scanned.files[segment_id]
        kinds = [
            ("log", files.log),
            ("index", files.index),
            ("timeindex", files.timeindex),
            ("txnindex", files.txnindex),
            ("snapshot", snapshots.get(segment_file_name(end_offset + 1, "snapshot"))),
        ]
        present = [(kind, info) for kind, info in kinds if info is not None]
        meta = scanned.scanned_by_id[segment_id].meta
        upload = SegmentUpload(
            part.tp,
            files.base_offset,
            end_offset,
            meta.largest_timestamp,
            meta.mtime_ms,
            tuple((kind, info.path) for kind, info in present),
            tuple(e for e in (epochs or ()) if e[1] <= end_offset),
        )
        tasks.append(UploadTask(key, scanned.url, upload, sum(info.size for _, info in present)))
    return tasks


def upload_all(
    spark: Spark, tasks: list[UploadTask], remote_url: str, max_bytes_per_second: int | None
) -> dict[int, list[RemoteSegment]]:
    """Every upload, in parallel, at most `max_bytes_per_second` for the run; by key, in offset
    order."""
    if not tasks:
        return {}
    lazy = LazySpark.of(spark)
    chosen = spark_packs(lazy, tasks, [t.size for t in tasks], UPLOAD_TASKS_PER_CORE)
    rate = per_task(max_bytes_per_second, min(len(chosen), lazy.parallelism()))
    rows = on_workers(lazy, chosen, lambda pack: run_uploads(pack, remote_url, rate))
    out: dict[int, list[RemoteSegment]] = {}
    for key, segment in rows:
        out.setdefault(key, []).append(segment)
    for segments in out.values():
        segments.sort(key=lambda s: s.base_offset)
    return out


def run_uploads(
    pack: list[UploadTask], remote_url: str, rate: float | None
) -> list[tuple[int, RemoteSegment]]:
    """Executed on a worker."""
    tier = RemoteTier.open(remote_url)
    throttle = Throttle(rate) if rate else None
    sources: dict[str, Storage] = {}
    out = []
    for task in pack:
        if task.source_url not in sources:
            sources[task.source_url] = open_storage(task.source_url)[0]
        out.append((task.key, tier.upload(sources[task.source_url], task.upload, throttle)))
        fault_point("mid-upload")
    return out
