"""The remote log metadata rebuilt from the storage's objects alone, for when the metadata topic is
lost: each whole segment the storage holds, as the COPY_SEGMENT_STARTED and COPY_SEGMENT_FINISHED
records its upload wrote, in the order the uploads finished. Replayed like the real records, the
leader-epoch rules then pick the segments the broker served (a new leader's re-upload of a
segment's offsets replaces the older one).

Where each fact comes from:
- Aiven's plugin writes into each segment's manifest its whole `remoteLogSegmentMetadata` (id,
  offsets, leader epochs, timestamps, broker); the object's name must agree with it, and the log's
  size is the chunk index's original size.
- Kafka's LocalTieredStorage names each file `<start offset>-<segment id>` and writes the broker's
  leader-epoch checkpoint up to the segment's end beside it; the end offset and largest timestamp
  are the log's own, from a scan of its batches.
A segment whose objects are not all there (an upload that failed, a deletion half done) is left
out (the read names it); one whose objects contradict their names is refused.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from segment_io.checkpoints import parse_leader_epoch_checkpoint
from segment_io.errors import KafkaTierCorrupt
from segment_io.kafka_tier.aiven import AivenManifest
from segment_io.kafka_tier.bucket import BucketSegment, bucket_partitions, bucket_segments, expected_suffixes
from segment_io.kafka_tier.metadata import (
    TXN_INDEX_EMPTY,
    MetadataRecord,
    SegmentMetadata,
    SegmentState,
    SegmentUpdate,
    TopicIdPartition,
)
from segment_io.kafka_tier.metadata_cache import MetadataReplay, segment_epochs
from segment_io.kafka_tier.settings import AIVEN_RSM, TierSettings
from segment_io.segment.scan import scan_buffer
from segment_io.storage.base import Storage

NO_BROKER = -1  # LocalTieredStorage's names do not say which broker uploaded a segment


def bucket_metadata(storage: Storage, root: str, settings: TierSettings) -> Iterator[MetadataRecord]:
    """The records the uploads of every whole segment in the storage wrote, uploads in the order
    they finished (event time, then leader epoch)."""
    whole = expected_suffixes(settings)
    found: list[SegmentMetadata] = []
    for tip in bucket_partitions(storage, root, settings):
        for seg in bucket_segments(storage, root, settings, tip).values():
            if whole <= seg.suffixes:
                found.append(
                    _aiven(storage, tip, seg) if settings.plugin == AIVEN_RSM else _local(storage, tip, seg)
                )
    found.sort(key=lambda s: (s.event_timestamp_ms, max(e for e, _ in s.leader_epochs), s.start_offset))
    for meta in found:
        yield meta
        yield SegmentUpdate(
            meta.tp,
            meta.segment_id,
            meta.broker_id,
            meta.event_timestamp_ms,
            None,
            SegmentState.COPY_SEGMENT_FINISHED,
        )


def _aiven(storage: Storage, tip: TopicIdPartition, seg: BucketSegment) -> SegmentMetadata:
    path = seg.objects["rsm-manifest"]
    where = storage.url(path)
    manifest = AivenManifest.parse(storage.read(path), where)
    said = manifest.segment
    if said is None:
        raise KafkaTierCorrupt(
            where,
            None,
            "the manifest carries no remoteLogSegmentMetadata (an older plugin): the segment's "
            "offsets and leader epochs are nowhere but in the lost metadata topic",
        )
    try:
        seg_id = said["remoteLogSegmentId"]
        topic_id = seg_id["topicIdPartition"]["topicId"]
        named = seg_id["topicIdPartition"]["topicPartition"]
        epochs = tuple(sorted((int(e), int(o)) for e, o in said["segmentLeaderEpochs"].items()))
        meta = SegmentMetadata(
            TopicIdPartition(named["topic"], topic_id, int(named["partition"])),
            seg_id["id"],
            int(said["startOffset"]),
            int(said["endOffset"]),
            int(said.get("brokerId", NO_BROKER)),
            int(said["maxTimestampMs"]),
            int(said["eventTimestampMs"]),
            epochs,
            manifest.original_size,
            None,
            SegmentState.COPY_SEGMENT_STARTED,
            ((TXN_INDEX_EMPTY, b"\x01" if said["txnIdxEmpty"] else b"\x00"),)
            if "txnIdxEmpty" in said
            else (),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise KafkaTierCorrupt(where, None, f"its remoteLogSegmentMetadata does not parse: {exc!r}") from None
    if (meta.tp, meta.segment_id, meta.start_offset) != (tip, seg.segment_id, seg.start_offset) or not epochs:
        raise KafkaTierCorrupt(
            where,
            None,
            f"the manifest describes segment {meta.segment_id} of {meta.tp.dir_name} (topic id "
            f"{meta.tp.topic_id}) from offset {meta.start_offset}, its name segment {seg.segment_id} from "
            f"{seg.start_offset}: which one it is cannot be told",
        )
    return meta


def _local(storage: Storage, tip: TopicIdPartition, seg: BucketSegment) -> SegmentMetadata:
    log_path = seg.objects["log"]
    where = storage.url(log_path)
    data = storage.read(log_path)
    table = scan_buffer(where, seg.start_offset, np.frombuffer(data, dtype=np.uint8)).table
    if not len(table) or int(table.base_offset[0]) < seg.start_offset:
        raise KafkaTierCorrupt(
            where, None, f"segment {seg.segment_id}: no batch at or above offset {seg.start_offset}"
        )
    end = int(table.last_offset[-1])
    epoch_path = seg.objects["leader_epoch_checkpoint"]
    chain = parse_leader_epoch_checkpoint(storage.read(epoch_path), storage.url(epoch_path))
    epochs = segment_epochs(chain, seg.start_offset, end)
    if not epochs:
        raise KafkaTierCorrupt(
            storage.url(epoch_path), None, f"segment {seg.segment_id}: no leader epoch covers it"
        )
    max_ts = int(table.max_timestamp.max())
    txn = ((TXN_INDEX_EMPTY, b"\x00" if "txnindex" in seg.objects else b"\x01"),)
    return SegmentMetadata(
        tip,
        seg.segment_id,
        seg.start_offset,
        end,
        NO_BROKER,
        max_ts,
        seg.mtime_ms,
        epochs,
        len(data),
        None,
        SegmentState.COPY_SEGMENT_STARTED,
        txn,
    )


def describe_differences(replay: MetadataReplay, from_bucket: dict[str, list[SegmentMetadata]]) -> list[str]:
    """Where the metadata topic (replayed) and the storage's objects disagree on a partition's
    served segments (ids and offsets), one line per partition."""
    from_topic = {tip.dir_name: state.served() for tip, state in replay.served().items()}
    out = []
    for name in sorted(set(from_topic) | set(from_bucket)):
        a = {(s.segment_id, s.start_offset, s.end_offset) for s in from_topic.get(name, [])}
        b = {(s.segment_id, s.start_offset, s.end_offset) for s in from_bucket.get(name, [])}
        if a != b:
            only_topic = ", ".join(f"{i} ({lo}-{hi})" for i, lo, hi in sorted(a - b, key=lambda x: x[1]))
            only_bucket = ", ".join(f"{i} ({lo}-{hi})" for i, lo, hi in sorted(b - a, key=lambda x: x[1]))
            out.append(
                f"{name}: only the metadata topic serves [{only_topic}]; only the storage [{only_bucket}]"
            )
    return out
