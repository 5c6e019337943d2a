"""Local copies removed the way Kafka removes a segment: every file renamed to `.deleted`
(indexes first, the .log last, so that a stop half way leaves a whole segment or none), then
deleted. Only segments the committed manifest holds, or that total retention removed from the
log, are ever released."""

from __future__ import annotations

import posixpath

from pipelines.jobs.tier.plan import TierPlan
from pipelines.log.scanned import Scanned
from pipelines.runtime.faults import fault_point
from segment_io.checkpoints import format_offset_checkpoint
from segment_io.layout import LOG_START_CHECKPOINT, parse_segment_file_quiet
from segment_io.remote.manifest import PartitionManifest, RemoteSegment
from segment_io.topic_partition import TopicPartition

DELETED = ".deleted"


def _is_log_dir(scanned: Scanned) -> bool:
    """A log directory (root checkpoints live there), not a single partition directory."""
    parts = scanned.listing.partitions
    return not (len(parts) == 1 and parts[0].path == scanned.listing.path)


def release_segments(scanned: Scanned, plans: list[TierPlan]) -> int:
    """Remove every segment the plans delete or release; returns the bytes removed."""
    storage = scanned.storage
    removed = 0
    renamed: list[str] = []
    for plan in plans:
        for sid, _ in [*plan.local_deleted, *plan.local_released]:
            files = scanned.files[sid]
            for info in (files.index, files.timeindex, files.txnindex, files.log):
                if info is not None:
                    storage.rename(info.path, info.path + DELETED)
                    renamed.append(info.path + DELETED)
                    removed += info.size
            fault_point("mid-release")
    for path in renamed:
        storage.remove(path)
    return removed


def finish_releases(scanned: Scanned, manifests: dict[TopicPartition, PartitionManifest]) -> int:
    """Delete the `.deleted` files a stopped run left, where their data is proven gone from the
    log or kept elsewhere: a `.log.deleted` whose bytes (size and CRC-32C) are those of the remote
    segment at its base offset, or that ends (the next segment of either tier begins) at or below
    the log start offset; index files whose `.log` is already gone go with it. Any other
    `.deleted` file is left where it is. Returns how many were removed."""
    starts = scanned.listing.checkpoints.get(LOG_START_CHECKPOINT, {})
    count = 0
    for part in scanned.listing.partitions:
        manifest = manifests.get(part.tp)
        remote = {s.base_offset: s for s in manifest.segments} if manifest else {}
        bases = {s.base_offset for s in part.segments} | set(remote)
        left = [n for n, _ in part.ignored if n.endswith(DELETED) and parse_segment_file_quiet(n)]
        logs = {int(n.partition(".")[0]): n for n in left if n.endswith(".log" + DELETED)}
        # Decided per segment first, its .log removed last (what a stop mid-way must find again).
        kept = {
            base
            for base, name in logs.items()
            if not _gone(
                scanned,
                posixpath.join(part.path, name),
                remote.get(base),
                bases,
                starts.get(part.tp, 0),
                base,
            )
        }
        for name in sorted(left, key=lambda n: n.endswith(".log" + DELETED)):
            if int(name.partition(".")[0]) not in kept:
                scanned.storage.remove(posixpath.join(part.path, name))
                count += 1
    return count


def _gone(
    scanned: Scanned, path: str, copy: RemoteSegment | None, bases: set[int], log_start: int, base: int
) -> bool:
    """Whether the released `.log` at `path` may go: its remote copy holds the same bytes, or it
    lies wholly below the log start offset."""
    if any(base < b <= log_start for b in bases):
        return True
    held = scanned.storage.checksum(path)
    return copy is not None and (held.size, held.crc32c) == (copy.size, copy.objects["log"].crc32c)


def write_log_start_offsets(scanned: Scanned, plans: list[TierPlan]) -> None:
    """Advance the log directory's log-start-offset checkpoint where total retention moved it."""
    if not _is_log_dir(scanned):
        return
    current = dict(scanned.listing.checkpoints.get(LOG_START_CHECKPOINT, {}))
    local = {p.tp for p in scanned.listing.partitions}
    changed = False
    for plan in plans:
        if plan.tp in local and plan.log_start_offset > current.get(plan.tp, 0):
            current[plan.tp] = plan.log_start_offset
            changed = True
    if changed:
        path = posixpath.join(scanned.listing.path, LOG_START_CHECKPOINT)
        scanned.storage.write_atomic(path, format_offset_checkpoint(current))
