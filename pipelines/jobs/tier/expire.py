"""`tier --expire`: objects and manifest versions nobody needs any more, removed after a grace
period (docs/remote-tier.md#expiry).

An object the newest version does not reference stopped being referenced when the version after
the last one naming it was committed; one that no version ever named (an upload whose run
stopped before its commit) counts from when it was written. Either goes once that moment is
older than `segpipe.remote.orphan.grace.ms`, so a reader that took an older version a moment ago
still finds its objects. A version goes when its successor is older than the grace period;
the newest version, and everything it references, are never removed.

Every one of those moments is the store's own time (an object's, and a version object's,
modification time) against the wall clock: never a run's `now`, which moves retention rules only
(a version committed by a run judged "as of 2023" was still committed a minute ago).
"""

from __future__ import annotations

import itertools
import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipelines.clock import clock_ms
from pipelines.config import JobConfig
from pipelines.runtime.faults import fault_point
from segment_io.remote.manifest import PartitionManifest
from segment_io.remote.tier import RemoteTier
from segment_io.storage import Place
from segment_io.topic_partition import TopicPartition


@dataclass
class ExpiryResult:
    objects_deleted: int = 0
    bytes_deleted: int = 0
    versions_deleted: int = 0
    objects_kept: int = 0  # unreferenced, still within the grace period

    def line(self, dry_run: bool = False) -> str:
        return (
            f"segpipe: {'would expire' if dry_run else 'expired'} {self.objects_deleted:,} unreferenced "
            f"objects ({self.bytes_deleted / 2**20:,.1f} MB) and {self.versions_deleted:,} old manifest "
            f"versions; {self.objects_kept:,} unreferenced objects {'would be ' if dry_run else ''}kept "
            "within the grace period"
        )


def expire(
    remote: Place,
    config: JobConfig,
    log: Callable[[str], Any] = print,
    dry_run: bool = False,
    clock: Callable[[], int] = clock_ms,
) -> ExpiryResult:
    """Remove what no version needs once the grace period has passed on the wall clock `clock`."""
    tier = RemoteTier.open(remote)
    result = ExpiryResult()
    now_ms = clock()
    for tp in tier.partitions():
        _expire_partition(
            tier, tp, config.for_topic(tp.topic).remote_orphan_grace_ms, now_ms, result, dry_run
        )
    log(result.line(dry_run) + ("; dry run: nothing removed" if dry_run else ""))
    return result


def _expire_partition(
    tier: RemoteTier, tp: TopicPartition, grace_ms: int, now_ms: int, result: ExpiryResult, dry_run: bool
) -> None:
    stored = {f.name: f.mtime_ms for f in tier.storage.list(tier.manifest_dir(tp))}
    versions = [tier.read_version(tp, v) for v in tier.versions(tp)]
    if not versions:
        return
    newest = versions[-1]

    def committed(version: PartitionManifest) -> int:
        """When the store took the version (its object's time; the recorded time only where the
        store gives none)."""
        return stored.get(posixpath.basename(tier.version_path(tp, version.version))) or version.committed_ms

    # When each name stopped being referenced: the commit of the version after the last one naming it.
    released_at: dict[str, int] = {}
    for older, newer in itertools.pairwise(versions):
        for name in older.object_names - newer.object_names:
            released_at[name] = committed(newer)
        for name in newer.object_names:
            released_at.pop(name, None)
    keep = newest.object_names
    deadline = now_ms - grace_ms
    for obj in tier.segment_objects(tp):
        if obj.name in keep:
            continue
        since = released_at.get(obj.name, obj.mtime_ms)
        if since < deadline:
            if not dry_run:
                fault_point("mid-expire")  # between two removals, each whole
                tier.storage.remove(obj.path)
            result.objects_deleted += 1
            result.bytes_deleted += obj.size
        else:
            result.objects_kept += 1
    for older, newer in itertools.pairwise(versions):
        if committed(newer) < deadline:
            if not dry_run:
                tier.storage.remove(tier.version_path(tp, older.version))
            result.versions_deleted += 1
