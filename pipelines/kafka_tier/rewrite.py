"""What a run that rewrites served remote segments shares (erase and clean in place on Kafka's
tiered storage): the live cluster it needs, a staged successor's files, the report's entry of a
swap, and the refusal size-based retention makes."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pipelines.kafka_tier.swap import Cluster
from pipelines.kafka_tier.swap_journal import Swap
from segment_io.errors import KafkaTierSettings
from segment_io.kafka_tier.objects import SegmentObjects, SuccessorFiles
from segment_io.layout import segment_file_name
from segment_io.storage import Location
from segment_io.topic_partition import TopicPartition

RETENTION_BYTES = "retention.bytes"
STAGED_INDEXES = ("index", "timeindex", "txnindex")  # rewritten by the run with the log; the rest kept


def require_live_cluster(bootstrap: str | None, command: str, into_new: str) -> str:
    """A run in place changes the tier of a serving cluster: refused without one (its bootstrap
    servers returned). `command` names the run; `into_new` what it does to a stopped broker's log
    directory instead ("erased", "cleaned")."""
    if bootstrap is None:
        raise KafkaTierSettings(
            f"{command} --in-place on Kafka's tiered storage works with the live cluster: give "
            f"--bootstrap-server (a stopped broker's log directory is {into_new} into a new one: "
            f"{command} SRC DST --kafka-tier)"
        )
    return bootstrap


def staged_path(staging: Location, tp: TopicPartition, base: int, kind: str) -> str:
    """A staged segment file's path: the staged log's partition directory, Kafka's file name."""
    return posixpath.join(staging.path, tp.dir_name, segment_file_name(base, kind))


def staged_loader(
    staging: Location, tp: TopicPartition, base: int, objects: SegmentObjects
) -> Callable[[], SuccessorFiles]:
    """The successor's files: the staged log (streamed from the staging, never held) and indexes,
    and the old segment's producer snapshot and leader epochs (offsets are kept, and so is every
    producer's last batch: neither changes)."""

    def load() -> SuccessorFiles:
        others = {}
        for kind in STAGED_INDEXES:
            path = staged_path(staging, tp, base, kind)
            if staging.storage.exists(path):
                others[kind] = staging.storage.read(path)
        for kind in ("snapshot", "leader-epoch"):
            data = objects.index(kind)
            if data is not None:
                others[kind] = data
        return SuccessorFiles(staging.storage.open_read(staged_path(staging, tp, base, "log")), others)

    return load


def left_in_place(doc: Mapping[str, Any] | None) -> list[str]:
    """What a run in place did not do that it set out to (a partition left as it was, a swap
    undone, an old segment kept): one line each, empty when it did everything. Keeping a segment
    whole where its plugin could not serve its successor is not among them (a compaction that
    keeps more is still right). `doc`: the report's `kafka_tier` entry."""
    done = doc or {}
    lines = [f"{e['partition']}: {e['reason']}" for e in done.get("left_as_they_were", [])]
    for key in ("undone", "kept"):
        lines += [f"segment {e['replaced']}: {e['reason']}" for e in done.get(key, [])]
    return lines


def swap_doc(swap: Swap) -> dict[str, Any]:
    """A swap as a run's report names it."""
    tp = swap.old.tp
    return {
        "partition": f"{tp.topic}-{tp.partition}",
        "topic_id": tp.topic_id,
        "start_offset": swap.old.start_offset,
        "end_offset": swap.old.end_offset,
        "replaced": swap.old.segment_id,
        "by": swap.new.segment_id,
        "bytes_before": swap.old.size,
        "bytes_after": swap.new.size,
    }


def retention_refusals(
    replaced: Iterable[tuple[TopicPartition, int]], sizes: Mapping[TopicPartition, int], cluster: Cluster
) -> dict[TopicPartition, str]:
    """The partitions a swap would not be safe in, and why. Size-based retention counts a replaced
    segment and its successor both while they coexist (the old one is listed as unreferenced when
    it ended its leader epoch): the log's size (`sizes`: local and remote) with every replaced
    segment (`replaced`: its partition and size) counted twice must stay within `retention.bytes`,
    or the leader would expire the oldest segments early."""
    doubled: dict[TopicPartition, int] = {}
    for tp, size in replaced:
        doubled[tp] = doubled.get(tp, 0) + size
    left: dict[TopicPartition, str] = {}
    for tp, extra in doubled.items():
        limit = cluster.topic_config(tp.topic, RETENTION_BYTES)
        if limit is None or int(limit) < 0:
            continue
        size = sizes.get(tp, 0)
        if size + extra > int(limit):
            left[tp] = (
                f"{RETENTION_BYTES} is {int(limit):,}: while each replaced segment and its successor coexist "
                f"the leader counts {size + extra:,} bytes and would expire the oldest segments early"
            )
    return left
