"""A log written inside a remote tier, committed as new objects of the tier: what `clean --in-place`
and `erase --in-place` share. The job writes its output into a staging prefix inside the tier;
its segments are uploaded as new objects (new segment ids, each read back and checked) and
committed per partition as a new manifest version, only if the version the run started from is
still the newest (else a typed conflict and that partition is left as it was). Until the commit,
readers keep reading the old objects; afterwards the old objects are unreferenced and `tier
--expire` removes them once the grace period has passed."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from pipelines.clock import clock_ms
from pipelines.log.scanned import scan_log
from pipelines.output.remote_upload import partition_files, upload_all, upload_tasks
from pipelines.runtime.faults import fault_point
from pipelines.runtime.spark_handle import Spark
from pipelines.runtime.stop import publishing, raise_if_stopped
from segment_io.layout import CLEANER_CHECKPOINT, INCOMPLETE, MANIFEST, META_DIR
from segment_io.remote.manifest import PartitionManifest
from segment_io.remote.tier import RemoteTier
from segment_io.storage import Place, Storage
from segment_io.topic_partition import TopicPartition

STAGING = posixpath.join(META_DIR, "in-place")


def staging_path(tier: RemoteTier) -> str:
    """Where an in-place run stages its output, inside the tier."""
    return posixpath.join(tier.root, STAGING)


def remove_finished_staging(storage: Storage, path: str, log: Callable[[str], Any]) -> None:
    """A staging prefix whose output was published but whose commit never came (a stopped run) is
    garbage whichever way that run ended; an unfinished one is the job's to judge (dead: removed,
    alive: refused)."""
    if storage.exists(posixpath.join(path, META_DIR, MANIFEST)) and not storage.exists(
        posixpath.join(path, META_DIR, INCOMPLETE)
    ):
        log(f"segpipe: removed the staging of an in-place run that did not commit: {storage.url(path)}")
        storage.remove(path)


def commit_staged(
    spark: Spark,
    tier: RemoteTier,
    staged: Place,
    before: dict[TopicPartition, PartitionManifest],
    origin: str,
    log_starts: Mapping[str, int],
    log: Callable[[str], Any],
) -> int:
    """Upload the staged log's segments into the tier and commit one new version per partition
    (segments marked `origin`; log start offsets raised to `log_starts`, by partition name, where
    higher); returns the partitions committed."""
    scanned = scan_log(spark, staged, log, skip_corrupt=False)
    cleaned = scanned.listing.checkpoints.get(CLEANER_CHECKPOINT, {})
    tasks = []
    parts = list(scanned.listing.partitions)
    for key, part in enumerate(parts):
        # Each segment ends where the next begins, the last where the remote log ended before; an
        # empty segment (what retention leaves of an emptied log) holds nothing to tier.
        segments = [s for s in scanned.segments[part.tp] if s.meta.size > 0]
        ends = [s.meta.base_offset - 1 for s in segments[1:]] + [before[part.tp].next_offset - 1]
        chosen = [(s.meta.segment_id, end) for s, end in zip(segments, ends, strict=True)]
        tasks += upload_tasks(scanned, key, part, chosen)
    uploaded = upload_all(spark, tasks, tier.url, None)
    fault_point("in-place-uploaded")
    raise_if_stopped()
    with publishing(f"the new manifest versions of {tier.url}"):
        for key, part in enumerate(parts):
            if key == 1:
                fault_point("mid-commit")  # one partition committed, the others not yet
            old = before[part.tp]
            epochs, metadata = partition_files(scanned.storage, part)
            tier.commit(
                old.successor(
                    clock_ms(),  # the wall clock: expiry counts its grace period from it
                    segments=tuple(replace(s, origin=origin) for s in uploaded.get(key, [])),
                    log_start_offset=max(old.log_start_offset, log_starts.get(str(part.tp), 0)),
                    leader_epochs=epochs if epochs is not None else old.leader_epochs,
                    partition_metadata=metadata if metadata is not None else old.partition_metadata,
                    cleaner_offset=cleaned.get(part.tp, old.cleaner_offset),
                    note=origin,
                )
            )
    return len(parts)
