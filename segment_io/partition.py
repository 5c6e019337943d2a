"""Whole-partition reading and validation: every segment scanned, CRCs, ranges and indexes."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from segment_io.errors import CorruptIndex, SegmentError
from segment_io.format.constants import CODEC_MASK, OFFSET_ENTRY, TIME_ENTRY, TXN_ENTRY, Codec
from segment_io.index import (
    read_offset_index,
    read_time_index,
    read_txn_index,
    verify_offset_index,
    verify_time_index,
)
from segment_io.layout import LogDirListing, PartitionListing, SegmentFiles, list_log_dir
from segment_io.segment.reader import SegmentReader
from segment_io.segment.scan import SegmentScan, check_segment_ranges
from segment_io.storage import Storage


@dataclass(frozen=True)
class SegmentReport:
    base_offset: int
    path: str
    size: int
    mtime_ms: int
    batches: int
    records: int
    first_offset: int | None
    last_offset: int | None
    min_timestamp: int | None
    max_timestamp: int | None
    codecs: tuple[str, ...]
    magics: tuple[int, ...]
    aborted_txns: int
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class PartitionReport:
    topic: str
    partition: int
    path: str
    segments: tuple[SegmentReport, ...]
    ignored: tuple[tuple[str, str], ...]
    errors: tuple[SegmentError, ...] = field(default=())
    stray_files: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors and not any(s.errors for s in self.segments)


def _require_whole_entries(path: str, size: int, entry: int) -> None:
    """Kafka's sanity check of an index: its length is a whole number of entries (even the
    preallocated index of an active segment is)."""
    if size % entry:
        raise CorruptIndex(
            path, size - size % entry, f"length {size} is not a whole number of {entry}-byte entries"
        )


def _verify_indexes(
    storage: Storage, files: SegmentFiles, scan: SegmentScan, next_base: int | None
) -> list[str]:
    """Index checks (docs/log-format.md#offset-index and the two sections after it); returns
    warnings, raises CorruptIndex."""
    warnings = []
    table = scan.table
    if files.index is None:
        warnings.append("missing .index (Kafka rebuilds all indexes of this segment on load)")
    else:
        data = storage.read(files.index.path)
        _require_whole_entries(files.index.path, len(data), OFFSET_ENTRY)
        entries = read_offset_index(data)
        verify_offset_index(
            files.index.path, entries, scan.base_offset, table.position, table.last_offset, scan.valid_size
        )
    if files.timeindex is None:
        if files.index is not None:
            warnings.append("missing .timeindex: Kafka creates it empty and ages the segment by mtime")
    else:
        data = storage.read(files.timeindex.path)
        _require_whole_entries(files.timeindex.path, len(data), TIME_ENTRY)
        ts, rel = read_time_index(data)
        verify_time_index(
            files.timeindex.path, ts, rel, scan.base_offset, table.last_offset, table.max_timestamp
        )
    if files.txnindex is not None:
        prev = -1
        for i, txn in enumerate(read_txn_index(storage.read(files.txnindex.path), files.txnindex.path)):
            at = i * TXN_ENTRY
            if txn.last_offset <= prev:
                raise CorruptIndex(files.txnindex.path, at, "entries are not increasing in last offset")
            if txn.last_offset < scan.base_offset or (next_base is not None and txn.last_offset >= next_base):
                raise CorruptIndex(
                    files.txnindex.path, at, f"ABORT marker offset {txn.last_offset} is outside the segment"
                )
            if txn.first_offset > txn.last_offset:
                raise CorruptIndex(files.txnindex.path, at, "first offset is above the marker offset")
            prev = txn.last_offset
    return warnings


def scan_partition(storage: Storage, listing: PartitionListing) -> list[SegmentScan]:
    """Shallow-scan every segment of a partition and check their offset ranges (raises)."""
    scans = [SegmentReader(storage, s.log.path, s.base_offset).scan() for s in listing.segments]
    check_segment_ranges(scans)
    return scans


def inspect_partition(
    storage: Storage, listing: PartitionListing, verify_crc: bool = True
) -> PartitionReport:
    """Validate a partition; every problem is collected as a typed error, nothing is raised."""
    reports = []
    errors: list[SegmentError] = []
    scans: list[SegmentScan] = []
    for k, files in enumerate(listing.segments):
        next_base = listing.segments[k + 1].base_offset if k + 1 < len(listing.segments) else None
        seg_errors: list[str] = []
        warnings: list[str] = []
        reader = SegmentReader(storage, files.log.path, files.base_offset)
        scan = None
        try:
            scan = reader.scan()
            scans.append(scan)
            if scan.tail is not None:
                errors.append(scan.tail)
                seg_errors.append(str(scan.tail))
            if verify_crc:
                reader.verify_crcs()
            reader.resolve_wrappers()
            warnings += _verify_indexes(storage, files, scan, next_base)
        except SegmentError as exc:
            errors.append(exc)
            seg_errors.append(str(exc))
        reports.append(_segment_report(files, scan, seg_errors, warnings))
    try:
        check_segment_ranges(scans)
    except SegmentError as exc:
        errors.append(exc)
    return PartitionReport(
        listing.tp.topic,
        listing.tp.partition,
        listing.path,
        tuple(reports),
        listing.ignored,
        tuple(errors),
        listing.stray_files,
    )


def _segment_report(
    files: SegmentFiles, scan: SegmentScan | None, errors: list[str], warnings: list[str]
) -> SegmentReport:
    txns = files.txnindex.size // TXN_ENTRY if files.txnindex else 0
    if scan is None or len(scan.table) == 0:
        return SegmentReport(
            files.base_offset,
            files.log.path,
            files.size,
            files.log.mtime_ms,
            0,
            0,
            None,
            None,
            None,
            None,
            (),
            (),
            txns,
            tuple(errors),
            tuple(warnings),
        )
    t = scan.table
    first = np.where(t.base_offset >= 0, t.base_offset, t.last_offset)
    ts = t.max_timestamp[t.max_timestamp >= 0]
    codecs = tuple(Codec(int(c)).label for c in np.unique(t.attributes & CODEC_MASK))
    return SegmentReport(
        files.base_offset,
        files.log.path,
        files.size,
        files.log.mtime_ms,
        len(t),
        int(np.maximum(t.records_count, 0).sum()),
        int(first.min()),
        int(t.last_offset.max()),
        int(ts.min()) if len(ts) else None,
        int(ts.max()) if len(ts) else None,
        codecs,
        tuple(int(m) for m in np.unique(t.magic)),
        txns,
        tuple(errors),
        tuple(warnings),
    )


def inspect_log_dir(
    storage: Storage, path: str, verify_crc: bool = True
) -> tuple[LogDirListing, list[PartitionReport]]:
    """Validate a log directory, a partition directory, or one segment file."""
    listing = list_log_dir(storage, path, segment_file=True)
    return listing, [inspect_partition(storage, p, verify_crc) for p in listing.partitions]
