"""Small builders used by several tests (plain bytes, no project shortcuts)."""

from __future__ import annotations

from pathlib import Path

from segment_io.batch import Codec, build_v2_batch
from segment_io.compression import compress
from segment_io.records import RecordColumns

Record = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def v2_batch(
    base_offset: int,
    records: list[Record],
    *,
    codec: Codec = Codec.NONE,
    attributes: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    last_offset_delta: int | None = None,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
) -> bytes:
    """records: (offset delta, timestamp, key, value, headers); timestamps are absolute."""
    base_ts = records[0][1] if base_timestamp is None else base_timestamp
    cols = RecordColumns.from_records([(o, t - base_ts, k, v, h) for o, t, k, v, h in records])
    return build_v2_batch(
        base_offset=base_offset,
        records=compress(codec, cols.encode()),
        records_count=len(records),
        last_offset_delta=records[-1][0] if last_offset_delta is None else last_offset_delta,
        base_timestamp=base_ts,
        max_timestamp=max(r[1] for r in records) if max_timestamp is None else max_timestamp,
        attributes=attributes | int(codec),
        partition_leader_epoch=0,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


def write_segment(directory: Path, base_offset: int, data: bytes) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{base_offset:020d}.log"
    path.write_bytes(data)
    return path
