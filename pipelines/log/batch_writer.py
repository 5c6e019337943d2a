"""Writing the batches of one input segment into an output segment, given which of their records
stay: a batch that keeps every record is copied byte for byte; one that keeps some is rebuilt in
its codec and magic with its offsets and producer fields (docs/cleaning-rules.md#writing-kept-batches);
one that keeps none is dropped, or becomes an empty header where its action says RETAIN_EMPTY.
Shared by clean's rewrite (with Kafka's delete horizons) and erase (without)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from segment_io.format import records as rec
from segment_io.format.batch import build_empty_batch, build_v2_batch, parse_v2_header
from segment_io.format.batch_build import V2Headers, build_v2_batches
from segment_io.format.compression import CompressionLevels, compress
from segment_io.format.constants import (
    CODEC_MASK,
    DELETE_HORIZON_MASK,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    Codec,
)
from segment_io.format.record_columns import RecordColumns
from segment_io.index import AbortedTxn
from segment_io.segment.framing import Framed
from segment_io.segment.reader import SegmentReader
from segment_io.segment.scan import BatchTable
from segment_io.segment.writer import SegmentWriter


class BatchRetention(IntEnum):
    """What happens to a batch of a recopied segment, as Kafka names it
    (docs/cleaning-rules.md#batch-actions); plans hold these as int8 arrays."""

    DELETE = 0  # drop the whole batch unread
    DELETE_EMPTY = 1  # filter records; drop the batch if none survives
    RETAIN_EMPTY = 2  # filter records; keep an empty header if none survives


@dataclass
class WriteCounts:
    """What writing batches did (summed per partition in the reports)."""

    records_out: int = 0
    batches_copied: int = 0
    batches_rewritten: int = 0
    batches_emptied: int = 0
    batches_dropped: int = 0
    horizons_stamped: int = 0
    txn_indexed: int = 0


@dataclass(frozen=True)
class OutputSegment:
    """The output segment and what writing any of its batches needs."""

    writer: SegmentWriter
    counts: WriteCounts
    levels: CompressionLevels
    horizon_new: int  # the delete horizon a batch stamped now gets
    # The aborted transactions to index, by the last offset of their ABORT marker.
    txn_by_marker: dict[int, AbortedTxn] = field(default_factory=dict)
    stamp_horizons: bool = True  # False: an erase, which changes nothing but the records it removes


@dataclass(frozen=True)
class InputSegment:
    """An input segment, as its chunks are written: per batch its action and whether it is a
    marker that carries (or gets) a delete horizon."""

    reader: SegmentReader
    table: BatchTable
    actions: np.ndarray  # int8 BatchRetention
    discardable: np.ndarray  # bool


def _kept_per_batch(mask: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """How many records of each batch (records `bounds[b]:bounds[b + 1]`) `mask` selects."""
    running = np.concatenate([[0], np.cumsum(mask, dtype=np.int64)])
    return running[bounds[1:]] - running[bounds[:-1]]


def write_chunk(
    out: OutputSegment,
    src: InputSegment,
    live: np.ndarray,
    whole: np.ndarray,
    framed: Framed,
    keep: np.ndarray,
) -> None:
    """Copy, rewrite, empty or drop each batch of `live` in log order
    (docs/cleaning-rules.md#writing-kept-batches); `framed` holds the records of the batches not
    known to be kept `whole` (of a v2 batch, at least every record that stays), `keep` their
    verdicts. Decisions are vectorised over the chunk and every rewritten batch's records are
    re-based in one kernel call; per batch there is only the codec, the header and the append."""
    writer, stats = out.writer, out.counts
    reader, table = src.reader, src.table
    # Record ranges per batch of `live` (empty for whole batches, which were not framed).
    bounds = np.searchsorted(np.flatnonzero(~whole)[framed.record_batch], np.arange(len(live) + 1))
    # A v2 batch's record count is its header's (`framed` may hold only the records that can
    # stay); a legacy wrapper's is what framing found inside it.
    records = np.where(whole | (table.magic[live] == 2), table.records_count[live], np.diff(bounds))
    kept = np.where(whole, records, _kept_per_batch(keep, bounds))
    control = table.is_control[live]
    tombs = np.where(control, 0, _kept_per_batch(keep & (framed.value_len < 0), bounds))
    v2 = table.magic[live] == 2
    horizon_set = table.has_delete_horizon[live]
    # A kept v2 batch gets a delete horizon when it keeps a tombstone or is a marker that can
    # later go, unless it has one; then it is rewritten even if every record stays.
    stamp = out.stamp_horizons & v2 & ~horizon_set & ((tombs > 0) | src.discardable[live]) & (kept > 0)
    # A batch known to be kept `whole` (any magic; an empty one too) is copied as it is.
    verbatim = whole | (v2 & (kept > 0) & (kept == records) & ~stamp)
    rewrite = v2 & (kept > 0) & ~verbatim
    with_horizon = horizon_set | stamp
    chosen = np.flatnonzero(rewrite)
    sections, section_bounds, base_ts, largest_ts = rec.rebase_batches(
        framed.sections.data,
        framed.record_start,
        framed.body_start,
        framed.record_end,
        framed.timestamp,
        keep,
        bounds[chosen],
        bounds[chosen + 1],
        np.where(horizon_set, table.base_timestamp[live], out.horizon_new)[chosen],
        with_horizon[chosen],
    )
    stats.records_out += int(kept.sum())
    stats.horizons_stamped += int(stamp.sum())
    built, built_at = _rewritten(
        out,
        table,
        live[chosen],
        kept[chosen],
        with_horizon[chosen],
        sections,
        section_bounds,
        base_ts,
        largest_ts,
    )
    txn_by_marker = out.txn_by_marker
    cols = {name: getattr(table, name)[live].tolist() for name in _HEADER_COLUMNS}
    slot = np.cumsum(rewrite) - 1
    run_ends = _run_ends(table, live, verbatim & ~control)
    rewrite_ends = _consecutive_ends(rewrite & ~control)
    resume = 0  # the batches before it were appended with their run
    for j, i in enumerate(live.tolist()):
        if j < resume:
            continue
        base, last = cols["base_offset"][j], cols["last_offset"][j]
        if verbatim[j] and not control[j]:
            # A run of batches copied as they are, back to back in the input: appended at once.
            resume = int(run_ends[np.searchsorted(run_ends, j)]) + 1
            run = live[j:resume]
            writer.append_run(
                reader.batches_bytes(i, int(live[resume - 1]) + 1),
                table.size[run],
                table.base_offset[run],
                table.last_offset[run],
                table.max_timestamp[run],
            )
            stats.batches_copied += resume - j
        elif verbatim[j]:  # a marker, after which the aborted transaction it ends may be indexed
            writer.append(reader.batch_bytes(i), base, last, cols["max_timestamp"][j])
            stats.batches_copied += 1
        elif kept[j] == 0:
            if src.actions[i] != BatchRetention.RETAIN_EMPTY:
                stats.batches_dropped += 1
                continue
            if v2[j]:
                header = parse_v2_header(reader.batch_bytes(i))
                batch, max_ts = build_empty_batch(header), header.max_timestamp
            else:  # a legacy entry (erase's only: the log's last) keeps its offsets as a v2 header
                batch, base, last, max_ts = _empty_for_legacy(
                    table, i, framed, int(bounds[j]), int(bounds[j + 1])
                )
            writer.append(batch, base, last, max_ts)
            stats.batches_emptied += 1
        elif rewrite[j]:
            # A run of rewritten batches (a marker alone), built back to back: appended at once.
            resume = int(rewrite_ends[np.searchsorted(rewrite_ends, j)]) + 1 if not control[j] else j + 1
            s0, s1 = int(slot[j]), int(slot[resume - 1]) + 1
            run = live[j:resume]
            if resume - j == 1:  # alone (an erase's usual case): the cheaper call
                writer.append(built[built_at[s0] : built_at[s1]], base, last, int(built.max_timestamp[s0]))
            else:
                writer.append_run(
                    built[built_at[s0] : built_at[s1]],
                    np.diff(built_at[s0 : s1 + 1]),
                    table.base_offset[run],
                    table.last_offset[run],
                    built.max_timestamp[s0:s1],
                )
            stats.batches_rewritten += resume - j
        else:  # a kept legacy entry becomes a v2 batch (4.x)
            r0, r1 = int(bounds[j]), int(bounds[j + 1])
            # A kept tombstone is stamped where the pass compacts (clean), not by an erase.
            horizon = out.horizon_new if tombs[j] and out.stamp_horizons else None
            stats.horizons_stamped += int(horizon is not None)
            # A batch that must keep its offsets (erase's: the log's last) keeps its last one too.
            keep_last = int(table.last_offset[i]) if src.actions[i] == BatchRetention.RETAIN_EMPTY else None
            batch, base, last, max_ts = convert_legacy(
                table, i, framed, r0, r1, keep[r0:r1], horizon, out.levels, keep_last
            )
            writer.append(batch, base, last, max_ts)
            stats.batches_rewritten += 1
        if control[j] and last in txn_by_marker:
            writer.append_aborted(txn_by_marker[last])
            stats.txn_indexed += 1


def _run_ends(table: BatchTable, live: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """Where each run of `eligible` batches of `live` ends (the index of its last, ascending): a
    run is consecutive batches of the input lying back to back in its file."""
    position, size = table.position[live], table.size[live]
    joined = eligible[1:] & eligible[:-1] & (np.diff(live) == 1) & (position[1:] == position[:-1] + size[:-1])
    last = eligible & np.concatenate([~joined, [True]])
    return np.flatnonzero(last)


def _consecutive_ends(eligible: np.ndarray) -> np.ndarray:
    """Where each run of consecutive `eligible` entries ends (the index of its last, ascending)."""
    return np.flatnonzero(eligible & ~np.concatenate([eligible[1:], [False]]))


@dataclass(frozen=True)
class _Built:
    """Rewritten batches back to back (`data`), and each one's max timestamp."""

    data: np.ndarray
    max_timestamp: np.ndarray

    def __getitem__(self, part: slice) -> memoryview:
        return self.data.data[part]


def _rewritten(
    out: OutputSegment,
    table: BatchTable,
    batches: np.ndarray,
    kept: np.ndarray,
    with_horizon: np.ndarray,
    sections: np.ndarray,
    section_bounds: np.ndarray,
    base_ts: np.ndarray,
    largest_ts: np.ndarray,
) -> tuple[_Built, np.ndarray]:
    """The v2 batches `batches` rebuilt around their re-based kept records (`sections`, per batch
    `section_bounds`), in their own codec (docs/cleaning-rules.md#writing-kept-batches), and
    where each starts (one more entry: the end). The header keeps every field but the record
    count, base timestamp (the kept records' first, or the delete horizon), max timestamp (the
    kept records' largest, unless log-append time), and the delete-horizon flag."""
    if len(batches) == 0:
        return _Built(np.zeros(0, dtype=np.uint8), np.zeros(0, dtype=np.int64)), np.zeros(1, dtype=np.int64)
    attrs = table.attributes[batches].astype(np.int64) & ~DELETE_HORIZON_MASK
    codecs = (attrs & CODEC_MASK).tolist()
    compressed = [
        compress(Codec(c), sections[a:b], out.levels)
        for c, a, b in zip(codecs, section_bounds[:-1].tolist(), section_bounds[1:].tolist(), strict=True)
    ]
    max_ts = np.where(table.log_append_time[batches], table.max_timestamp[batches], largest_ts)
    headers = V2Headers(
        base_offset=table.base_offset[batches],
        records_count=kept.astype(np.int64),
        last_offset_delta=table.last_offset[batches] - table.base_offset[batches],
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        attributes=attrs | np.where(with_horizon, DELETE_HORIZON_MASK, 0),
        partition_leader_epoch=table.leader_epoch[batches].astype(np.int64),
        producer_id=table.producer_id[batches].astype(np.int64),
        producer_epoch=table.producer_epoch[batches].astype(np.int64),
        base_sequence=table.base_sequence[batches].astype(np.int64),
    )
    data, sizes = build_v2_batches(headers, compressed)
    at = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=at[1:])
    return _Built(data, max_ts), at


# The header fields the append loop reads per batch (the rewritten batches' come from _rewritten).
_HEADER_COLUMNS = ("base_offset", "last_offset", "max_timestamp")


def _empty_for_legacy(
    table: BatchTable, i: int, framed: Framed, r0: int, r1: int
) -> tuple[bytes, int, int, int]:
    """The header-only v2 batch that stands for a legacy entry none of whose records stays, over
    the offsets of its records (a wrapper's own offset is its last record's)."""
    base, last = int(framed.offset[r0]), int(framed.offset[r1 - 1])
    log_append = int(table.magic[i]) == 1 and bool(table.attributes[i] & TIMESTAMP_TYPE_MASK)
    max_ts = int(table.max_timestamp[i]) if int(table.magic[i]) == 1 else NO_TIMESTAMP
    attributes = TIMESTAMP_TYPE_MASK if log_append else 0
    batch = build_v2_batch(
        base_offset=base,
        records=b"",
        records_count=0,
        last_offset_delta=last - base,
        base_timestamp=NO_TIMESTAMP,
        max_timestamp=max_ts,
        attributes=attributes,
    )
    return batch, base, last, max_ts


def convert_legacy(
    table: BatchTable,
    i: int,
    framed: Framed,
    r0: int,
    r1: int,
    kmask: np.ndarray,
    horizon: int | None,
    levels: CompressionLevels,
    last_offset: int | None = None,
) -> tuple[bytes, int, int, int]:
    """A kept v0/v1 entry becomes a v2 batch of its kept records, as Kafka 4.x converts them
    (docs/cleaning-rules.md#writing-kept-batches); `last_offset`: the batch's last offset where
    it must stay the entry's (else its last kept record's)."""
    data = framed.sections.data
    rows = np.flatnonzero(kmask) + r0
    offsets = framed.offset[rows]
    ts = framed.timestamp[rows]
    base = int(offsets[0])
    magic = int(table.magic[i])
    log_append = magic == 1 and bool(table.attributes[i] & TIMESTAMP_TYPE_MASK)
    base_ts = horizon if horizon is not None else int(ts[0])

    def field_bytes(starts: np.ndarray, lengths: np.ndarray, r: int) -> bytes | None:
        length = int(lengths[r])
        return None if length < 0 else data[int(starts[r]) : int(starts[r]) + length].tobytes()

    cols = RecordColumns.from_records(
        [
            (
                int(framed.offset[r]) - base,
                int(framed.timestamp[r]) - base_ts,
                field_bytes(framed.key_start, framed.key_len, r),
                field_bytes(framed.value_start, framed.value_len, r),
                [],
            )
            for r in rows.tolist()
        ]
    )
    attrs = int(table.attributes[i]) & CODEC_MASK
    if log_append:
        attrs |= TIMESTAMP_TYPE_MASK
    if horizon is not None:
        attrs |= DELETE_HORIZON_MASK
    max_ts = int(table.max_timestamp[i]) if log_append else int(ts.max())
    last = int(offsets[-1]) if last_offset is None else last_offset
    batch = build_v2_batch(
        base_offset=base,
        records=compress(Codec(attrs & CODEC_MASK), cols.encode(), levels),
        records_count=len(rows),
        last_offset_delta=last - base,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        attributes=attrs,
    )
    return batch, base, last, max_ts
