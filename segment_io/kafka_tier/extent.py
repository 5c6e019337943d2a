"""Where a tiered partition's log starts and ends, proved from witnesses that do not lean on one
another: the broker's log-start-offset-checkpoint and local segments, the remote log metadata
replayed, the metadata topic's own log, and the objects in the storage. The metadata alone says
which segments exist; it cannot say that none is missing from its records. So every offset from
the log start to the local log must be in a served segment or a local one, and the metadata must
begin where its own log begins; otherwise the read is refused with the offsets and the witness
that lacks them.

What a running cluster leaves that is normal, and how it is taken:
- a segment whose upload is in flight (COPY_SEGMENT_STARTED only) is not served; its data is
  still local (a broker deletes a local segment only after its copy finished), its objects are
  orphans, named and never read;
- segments remote retention just expired (DELETE_SEGMENT_STARTED or FINISHED): the log start the
  broker checkpoints (once a minute) can lag behind them; offsets that only such segments held are
  gone by retention, and the log starts at the first served segment, with a note;
- objects of a failed upload or of a deletion that did not finish: orphans, named, not read.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterable, Sequence

from segment_io.checkpoints import parse_offset_checkpoint
from segment_io.errors import KafkaTierCorrupt, KafkaTierSettings
from segment_io.kafka_tier.bucket import BucketSegment
from segment_io.kafka_tier.metadata import SegmentMetadata, SegmentState
from segment_io.kafka_tier.metadata_cache import PartitionState
from segment_io.kafka_tier.metadata_log import metadata_partitions
from segment_io.kafka_tier.objects import SegmentObjects
from segment_io.kafka_tier.settings import METADATA_TOPIC, TierSettings
from segment_io.layout import (
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_CHECKPOINT,
    RECOVERY_CHECKPOINT,
    list_partition,
    parse_topic_partition,
)
from segment_io.storage.base import Storage
from segment_io.topic_partition import TopicPartition

FROM_BUCKET_HINT = "--from-bucket reads the topic from its storage's objects alone"


def root_checkpoint(storage: Storage, root: str, name: str) -> dict[TopicPartition, int]:
    """One root checkpoint of the log directory at `root` (empty where it has none)."""
    path = f"{root.rstrip('/')}/{name}"
    return parse_offset_checkpoint(storage.read(path), path) if storage.is_file(path) else {}


def log_starts(storage: Storage, root: str) -> dict[TopicPartition, int]:
    """The log-start-offset-checkpoint of the log directory at `root`. A broker lists every
    partition whose remote storage is enabled, and any other whose log start is above its first
    local segment."""
    return root_checkpoint(storage, root, LOG_START_CHECKPOINT)


def log_reaches(storage: Storage, root: str) -> dict[TopicPartition, int]:
    """The offset each partition's log reached by the broker's own word: the larger of its high
    watermark and recovery point checkpoints (both at most the log end offset)."""
    out = dict(root_checkpoint(storage, root, HIGH_WATERMARK_CHECKPOINT))
    for tp, offset in root_checkpoint(storage, root, RECOVERY_CHECKPOINT).items():
        out[tp] = max(out.get(tp, offset), offset)
    return out


def require_log_end(
    tp: TopicPartition, reaches: int | None, served: list[SegmentMetadata], local_bases: list[int], where: str
) -> None:
    """A partition whose remote log ends with no local segment above it ends there; the broker's
    checkpoints must not say it reached further (its partition directory lost, or its newest
    segments)."""
    if reaches is None or not served:
        return
    end = served[-1].end_offset + 1
    if reaches > end and not any(b >= end for b in local_bases):
        raise KafkaTierCorrupt(
            where,
            None,
            f"the broker's {HIGH_WATERMARK_CHECKPOINT} and {RECOVERY_CHECKPOINT} say the log of "
            f"{tp.dir_name} reached {reaches}, its remote log ends at {end - 1} and no local segment is "
            f"above it: offsets {end}-{reaches - 1} are in neither tier",
        )


def require_metadata_heads(storage: Storage, root: str, settings: TierSettings) -> None:
    """Each `__remote_log_metadata` partition begins where its log does: at the log start its
    log directory's checkpoint lists, else at 0 while the topic keeps every record (Kafka's
    default), else at its first segment. A metadata log whose first records are gone has lost the
    records of the segments tiered first, and a replay of the rest would serve a shorter log."""
    starts = log_starts(storage, root)
    for path in metadata_partitions(storage, root):
        tp = parse_topic_partition(path.rstrip("/").rsplit("/", 1)[-1])
        assert tp is not None
        segments = list_partition(storage, path, tp).segments
        first = next((s for s in segments if s.log.size >= 8), None)
        begins = _first_batch_offset(storage, first.log.path) if first else None
        if begins is None:
            begins = segments[0].base_offset if segments else 0
        if tp in starts:
            expected, why = starts[tp], f"its {LOG_START_CHECKPOINT} says its log starts at {starts[tp]}"
        elif settings.metadata_retained:
            expected, why = 0, "the topic keeps every record: remote.log.metadata.topic.retention.ms is -1"
        else:
            expected, why = (segments[0].base_offset if segments else 0), "where its first segment begins"
        if begins != expected:
            raise KafkaTierCorrupt(
                storage.url(first.log.path if first else path),
                0 if first else None,
                f"the remote log metadata partition {tp.dir_name} begins at offset {begins}, not at "
                f"{expected} ({why}): its first records are gone, and with them what they said of the "
                f"segments tiered first; {FROM_BUCKET_HINT}",
            )


def _first_batch_offset(storage: Storage, path: str) -> int | None:
    head = storage.read(path, 0, 8)
    return struct.unpack(">q", head)[0] if len(head) == 8 else None


def _covered(ranges: Iterable[tuple[int, int]], start: int, end: int) -> bool:
    """Whether [start, end] lies within the union of `ranges`."""
    at = start
    for lo, hi in sorted(ranges):
        if lo > at:
            break
        at = max(at, hi + 1)
        if at > end:
            return True
    return at > end


def require_log_start(
    tp: TopicPartition,
    log_start: int | None,
    served: list[SegmentMetadata],
    local_bases: list[int],
    state: PartitionState | None,
    where: str,
) -> str | None:
    """Refuse a partition whose log start (the broker's checkpoint) lies below every offset the
    served remote segments and the local ones hold, unless the metadata records the deletion of
    segments that held those offsets (remote retention, checkpointed late): then a note saying so."""
    first = served[0].start_offset if served else (local_bases[0] if local_bases else None)
    if log_start is None or first is None or first <= log_start:
        return None
    gap = f"offsets {log_start}-{first - 1}"
    if state is not None and _covered(state.expired, log_start, first - 1):
        return (
            f"{tp.dir_name}: {gap} were deleted by remote retention (the remote log metadata records "
            f"their segments' deletion; the {LOG_START_CHECKPOINT} is older): the log starts at {first}"
        )
    said = f"the broker's {LOG_START_CHECKPOINT} says the log of {tp.dir_name} starts at {log_start}"
    if served:
        raise KafkaTierCorrupt(
            where,
            None,
            f"{said}, the first remote segment its remote log metadata serves at {first}: {gap} are in "
            f"no segment the metadata knows (its records of them are gone); {FROM_BUCKET_HINT}",
        )
    raise KafkaTierCorrupt(
        where,
        None,
        f"{said}, its local segments at {first}, and the remote log metadata has no segment of it: "
        f"{gap} are in neither tier (the metadata partitions are missing or lost these records); "
        f"{FROM_BUCKET_HINT}",
    )


def require_contiguous(where: str, segs: list[SegmentMetadata], local_bases: list[int]) -> None:
    """A remote segment ends where the next begins (the broker copies a segment whole, its end the
    next segment's base offset less one), and the local log continues where the remote one ends:
    a gap is a segment lost, refused rather than read past."""
    for before, after in itertools.pairwise(segs):
        if after.start_offset != before.end_offset + 1:
            raise KafkaTierCorrupt(
                where,
                None,
                f"offsets {before.end_offset + 1}-{after.start_offset - 1} are "
                f"in no remote segment (between {before.segment_id} and {after.segment_id})",
            )
    above = [b for b in sorted(local_bases) if b > segs[-1].end_offset]
    if above and above[0] != segs[-1].end_offset + 1:
        raise KafkaTierCorrupt(
            where,
            None,
            f"the remote log ends at {segs[-1].end_offset} and the local log "
            f"begins at {above[0]}: offsets between are in neither",
        )


def stray_objects(
    found: dict[str, BucketSegment],
    segs: Sequence[SegmentObjects],
    state: PartitionState | None,
    settings: TierSettings,
    tp: TopicPartition,
) -> str | None:
    """The storage holds the partition's objects (else the settings point at another place: a
    settings error naming the setting), and what it holds beyond the served segments, named in a
    warning (never read); None where there is nothing to say."""
    if not found and not segs[0].present():
        tip = segs[0].seg.tp
        prefix = f" (rsm.config.key.prefix={settings.key_prefix})" if settings.key_prefix else ""
        raise KafkaTierSettings(
            f"{settings.source}: {settings.storage_setting}={settings.storage_url}{prefix} holds no object "
            f"of topic {tip.topic} (id {tip.topic_id}) partition {tip.partition}: the remote log metadata "
            "names its segments, so these settings point at another cluster's storage, or at the wrong place"
        )
    lost = orphans(found, (s.seg for s in segs), state)
    if not lost:
        return None
    return (
        f"warning: {tp.dir_name}: {len(lost)} segment(s) in the remote storage are not part of the log the "
        "broker serves, and are not read: " + "; ".join(lost)
    )


def orphans(
    found: dict[str, BucketSegment], served: Iterable[SegmentMetadata], state: PartitionState | None
) -> list[str]:
    """The segments whose objects the storage holds but the broker does not serve, each with why
    (what a running cluster leaves: an upload in flight or failed, a deletion not finished)."""
    serving = {s.segment_id for s in served}
    known = state.segments if state is not None else {}
    out = []
    for seg_id, seg in sorted(found.items(), key=lambda kv: (kv[1].start_offset, kv[0])):
        if seg_id in serving:
            continue
        meta = known.get(seg_id)
        if meta is None:
            why = "the remote log metadata does not know it (a failed upload, or a deletion it finished)"
        elif meta.state is SegmentState.COPY_SEGMENT_STARTED:
            why = "its upload never finished"
        elif meta.state is SegmentState.DELETE_SEGMENT_STARTED:
            why = "its deletion has started"
        else:
            why = "another segment serves its offsets (a new leader uploaded them again)"
        out.append(f"{seg_id} (from offset {seg.start_offset}; {', '.join(sorted(seg.suffixes))}): {why}")
    return out


def untiered_read(storage: Storage, root: str) -> str | None:
    """Why the log directory at `root` cannot be read as the whole log without its Kafka remote
    tier, or None: it holds `__remote_log_metadata` partitions, so its broker tiers topics, and a
    tiered partition's local segments are only its newest part."""
    if not metadata_partitions(storage, root):
        return None
    starts = log_starts(storage, root)
    short = []
    for tp, start in sorted(starts.items()):
        part = list_partition(storage, f"{root.rstrip('/')}/{tp.dir_name}", tp)
        if part.segments and part.segments[0].base_offset > start:
            short.append(
                f"{tp.dir_name} starts at {start}, its local segments at {part.segments[0].base_offset}"
            )
    detail = f" ({'; '.join(short[:3])}{'; ...' if len(short) > 3 else ''})" if short else ""
    return (
        f"{storage.url(root)} holds {METADATA_TOPIC}: its broker keeps topics in Kafka's tiered storage, "
        f"and read alone a tiered partition holds only its local segments{detail}; give the broker's "
        "tiered-storage settings with --kafka-tier SETTINGS (a job file's kafka_tier, the source's kafkaTier)"
    )
