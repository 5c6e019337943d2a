"""The `__remote_log_metadata` topic read from a log directory (a stopped broker's, or a copy of
its metadata partitions): every record value of every partition, each partition in offset order
(a segment's records all go to one partition, so their order is kept)."""

from __future__ import annotations

from collections.abc import Iterator

from segment_io.kafka_tier.metadata import MetadataRecord, decode_metadata_record
from segment_io.kafka_tier.settings import METADATA_TOPIC
from segment_io.layout import list_partition, parse_topic_partition
from segment_io.segment.reader import SegmentReader
from segment_io.storage.base import FileInfo, Storage


def is_metadata_partition(info: FileInfo) -> bool:
    tp = parse_topic_partition(info.name) if info.is_dir else None
    return tp is not None and tp.topic == METADATA_TOPIC


def metadata_partitions(storage: Storage, root: str) -> list[str]:
    """The paths of the log directory's `__remote_log_metadata` partitions, by partition."""
    found = []
    for entry in storage.list(root):
        tp = parse_topic_partition(entry.name)
        if entry.is_dir and tp is not None and tp.topic == METADATA_TOPIC:
            found.append((tp.partition, entry.path))
    return [path for _, path in sorted(found)]


def read_metadata_log(storage: Storage, root: str) -> Iterator[MetadataRecord]:
    """Every remote log metadata record in the log directory at `root` (CRCs verified)."""
    for path in metadata_partitions(storage, root):
        yield from read_metadata_partition(storage, path)


def read_metadata_partition(storage: Storage, path: str) -> Iterator[MetadataRecord]:
    """The records of one `__remote_log_metadata` partition directory, in offset order."""
    tp = parse_topic_partition(path.rstrip("/").rsplit("/", 1)[-1])
    assert tp is not None
    for seg in list_partition(storage, path, tp).segments:
        reader = SegmentReader(storage, seg.log.path, seg.base_offset)
        reader.verify_crcs()
        for rb in reader.record_batches(tp.topic, tp.partition):
            control = rb.column("is_control").to_pylist()
            offsets, values = rb.column("offset").to_pylist(), rb.column("value").to_pylist()
            for is_control, offset, value in zip(control, offsets, values, strict=True):
                if not is_control and value is not None:
                    yield decode_metadata_record(value, f"{seg.log.path} (offset {offset})")
