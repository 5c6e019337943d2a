"""`tier --expire`: objects and manifest versions nobody needs any more, removed after a grace
period (docs/remote-tier.md#expiry).

An object the newest version does not reference stopped being referenced when the version after
the last one naming it was committed; one that no version ever named (an upload whose run
stopped before its commit) counts from when it was written. Either goes once that moment is
older than `segpipe.remote.orphan.grace.ms`, so a reader that took an older version a moment ago
still finds its objects. A version goes when its successor is older than the grace period;
the newest version, and everything it references, are never removed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipelines.config import JobConfig
from segment_io.remote.tier import RemoteTier
from segment_io.topic_partition import TopicPartition


@dataclass
class ExpiryResult:
    objects_deleted: int = 0
    bytes_deleted: int = 0
    versions_deleted: int = 0
    objects_kept: int = 0  # unreferenced, still within the grace period

    def line(self) -> str:
        return (
            f"segpipe: expired {self.objects_deleted:,} unreferenced objects "
            f"({self.bytes_deleted / 2**20:,.1f} MB) and {self.versions_deleted:,} old manifest versions; "
            f"{self.objects_kept:,} unreferenced objects kept within the grace period"
        )


def expire(
    remote_url: str, config: JobConfig, now_ms: int, log: Callable[[str], Any] = print, dry_run: bool = False
) -> ExpiryResult:
    tier = RemoteTier.open(remote_url)
    result = ExpiryResult()
    for tp in tier.partitions():
        _expire_partition(
            tier, tp, config.for_topic(tp.topic).remote_orphan_grace_ms, now_ms, result, dry_run
        )
    log(("dry run: " if dry_run else "") + result.line())
    return result


def _expire_partition(
    tier: RemoteTier, tp: TopicPartition, grace_ms: int, now_ms: int, result: ExpiryResult, dry_run: bool
) -> None:
    versions = [tier.read_version(tp, v) for v in tier.versions(tp)]
    if not versions:
        return
    newest = versions[-1]
    # When each name stopped being referenced: the commit time of the version after the last
    # version that names it.
    released_at: dict[str, int] = {}
    for older, newer in itertools.pairwise(versions):
        for name in older.object_names - newer.object_names:
            released_at[name] = newer.committed_ms
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
                tier.storage.remove(obj.path)
            result.objects_deleted += 1
            result.bytes_deleted += obj.size
        else:
            result.objects_kept += 1
    for older, newer in itertools.pairwise(versions):
        if newer.committed_ms < deadline:
            if not dry_run:
                tier.storage.remove(tier.version_path(tp, older.version))
            result.versions_deleted += 1
