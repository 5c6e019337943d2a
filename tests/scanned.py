"""Scanned segments built by hand: batch headers as the scan reports them, for the planners'
tests (no files, no Spark)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipelines.log.scan import NOT_CONTROL, ScannedSegment, SegmentMeta
from segment_io.format.constants import CONTROL_MASK, DELETE_HORIZON_MASK, TRANSACTIONAL_MASK, ControlType
from segment_io.index import AbortedTxn
from segment_io.segment.scan import BatchTable

T0 = 1_700_000_000_000


@dataclass(frozen=True)
class Batch:
    """One batch header as the scan reports it."""

    base: int
    last: int
    ts: int = T0
    pid: int = -1
    epoch: int = 0
    transactional: bool = False
    control: ControlType | None = None
    horizon: int | None = None  # a delete horizon the batch already carries
    magic: int = 2
    size: int = 100


def data(base: int, last: int | None = None, **kw: object) -> Batch:
    return Batch(base, base if last is None else last, **kw)  # type: ignore[arg-type]


def txn(base: int, last: int, pid: int, **kw: object) -> Batch:
    return Batch(base, last, pid=pid, transactional=True, **kw)  # type: ignore[arg-type]


def marker(offset: int, pid: int, kind: ControlType, **kw: object) -> Batch:
    return Batch(offset, offset, pid=pid, transactional=True, control=kind, **kw)  # type: ignore[arg-type]


def segment(
    sid: int,
    base: int,
    *batches: Batch,
    mtime: int = T0,
    largest: int | None = None,
    size: int | None = None,
    aborted: tuple[AbortedTxn, ...] = (),
) -> ScannedSegment:
    n = len(batches)
    table = BatchTable.empty(n)
    position = 0
    for i, b in enumerate(batches):
        attributes = (TRANSACTIONAL_MASK if b.transactional else 0) | (
            CONTROL_MASK if b.control is not None else 0
        )
        attributes |= DELETE_HORIZON_MASK if b.horizon is not None else 0
        row = {
            "position": position,
            "size": b.size,
            "magic": b.magic,
            "base_offset": b.base,
            "last_offset": b.last,
            "leader_epoch": 0,
            "crc": 0,
            "attributes": attributes,
            "base_timestamp": b.ts if b.horizon is None else b.horizon,
            "max_timestamp": b.ts,
            "producer_id": b.pid,
            "producer_epoch": b.epoch,
            "base_sequence": -1 if b.pid < 0 else 0,
            "records_count": b.last - b.base + 1,
        }
        for name, value in row.items():
            getattr(table, name)[i] = value
        position += b.size
    controls = np.array(
        [NOT_CONTROL if b.control is None else int(b.control) for b in batches], dtype=np.int16
    )
    meta = SegmentMeta(
        segment_id=sid,
        base_offset=base,
        size=position if size is None else size,
        mtime_ms=mtime,
        index_bytes=8 * n,
        timeindex_bytes=12 * n,
        largest_timestamp=max((b.ts for b in batches), default=mtime) if largest is None else largest,
        aborted=aborted,
    )
    return ScannedSegment(meta, table, controls)
