"""Recopying one output group (docs/cleaning-rules.md#record-verdicts and the sections after
it), given the group's surviving keyed offsets from the key map (keymap.py). Plain Python over
segment_io; batches in which no record survives are dropped from their headers alone, without
decompression."""

from __future__ import annotations

import posixpath
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from pipelines.config import TopicConfig
from pipelines.jobs.clean.keymap import NullKeys, Survivors, Tombstones
from pipelines.jobs.clean.plan import BatchRetention, GroupPlan
from pipelines.runtime.faults import fault_point
from segment_io.format import records as rec
from segment_io.format.batch import build_empty_batch, build_v2_batch, parse_v2_header
from segment_io.format.compression import CompressionLevels, compress
from segment_io.format.constants import CODEC_MASK, DELETE_HORIZON_MASK, INT32_MAX, TIMESTAMP_TYPE_MASK, Codec
from segment_io.layout import SegmentFiles
from segment_io.segment.framing import Framed, chunk_batches
from segment_io.segment.reader import SegmentReader
from segment_io.segment.scan import BatchTable
from segment_io.segment.sections import Arena
from segment_io.segment.writer import SegmentLimits, SegmentWriter
from segment_io.storage import open_storage

# ---------------------------------------------------------------------------------------------
# Rewrite


@dataclass(frozen=True)
class RewriteContext:
    """What a rewrite task needs besides its group plan."""

    src_url: str
    staging_url: str
    segments: dict[int, SegmentFiles]
    now_ms: int
    configs: dict[str, TopicConfig]  # by partition directory


@dataclass
class GroupStats:
    """What one rewrite task did (the report sums these per partition)."""

    gid: int
    partition_dir: str
    base_offset: int
    bytes_in: int = 0
    bytes_out: int = 0
    records_in: int = 0
    records_out: int = 0
    superseded: int = 0
    tombstones: int = 0
    aborted: int = 0
    null_keys: int = 0
    markers: int = 0
    batches_copied: int = 0
    batches_rewritten: int = 0
    batches_emptied: int = 0
    batches_dropped: int = 0
    horizons_stamped: int = 0
    txn_indexed: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class OutputSegment:
    """The output segment of one group and what writing any of its batches needs."""

    writer: SegmentWriter
    plan: GroupPlan
    stats: GroupStats
    levels: CompressionLevels
    horizon_new: int  # the delete horizon a batch stamped now gets
    stamp_horizons: bool = True  # False: an erase, which changes nothing but the records it removes


@dataclass(frozen=True)
class InputSegment:
    """The `k`-th input segment of the group, as its chunks are written."""

    k: int
    reader: SegmentReader
    table: BatchTable


def _levels(config: TopicConfig) -> CompressionLevels:
    return CompressionLevels(gzip=config.gzip_level, lz4=config.lz4_level, zstd=config.zstd_level)


def rewrite_groups(
    items: Iterable[tuple[int, np.ndarray | Tombstones | NullKeys | None]],
    groups: dict[int, GroupPlan],
    ctx: RewriteContext,
) -> Iterator[GroupStats]:
    """One reduce task of the group shuffle: gather each group's surviving offsets, which of them
    are tombstones, and null-key counts from the key map (a `None` item only announces the
    group), then rewrite it."""
    survivors: dict[int, Survivors] = {}
    tombstones: dict[int, Survivors] = {}
    null_keys: dict[int, int] = {}
    for gid, item in items:
        mine = survivors.setdefault(gid, Survivors())
        if isinstance(item, NullKeys):
            null_keys[gid] = null_keys.get(gid, 0) + item.count
        elif isinstance(item, Tombstones):
            tombstones.setdefault(gid, Survivors()).add(item.relative)
        elif item is not None:
            mine.add(item)
    fault_point("after-keymap")  # every key-map block of these groups has arrived
    for gid in sorted(survivors):
        tombs = tombstones.pop(gid, Survivors())
        yield rewrite_group(groups[gid], survivors.pop(gid), tombs, null_keys.get(gid, 0), ctx)


def rewrite_group(
    plan: GroupPlan, kept: Survivors, tombstones: Survivors, null_keys: int, ctx: RewriteContext
) -> GroupStats:
    """Recopy one group of input segments into one output segment.

    `kept`: the group's keyed records that the key map keeps, `tombstones`: which of them are
    tombstones; `null_keys`: how many null-key records the key map saw in the group (for the
    report)."""
    started = time.perf_counter()
    config = ctx.configs[plan.partition_dir]
    src, _ = open_storage(ctx.src_url)
    dst, dst_root = open_storage(ctx.staging_url)
    stats = GroupStats(plan.gid, plan.partition_dir, plan.base_offset)
    limits = SegmentLimits(2**62, config.segment_index_bytes * 2**20, config.index_interval_bytes)
    writer = SegmentWriter(dst, posixpath.join(dst_root, plan.partition_dir), limits)
    writer.roll(plan.base_offset)
    out = OutputSegment(writer, plan, stats, _levels(config), ctx.now_ms + config.delete_retention_ms)
    skipped_records = 0
    null_keys_decoded = 0
    arena = Arena()
    for k, sid in enumerate(plan.segment_ids):
        files = ctx.segments[sid]
        reader = SegmentReader(src, files.log.path, files.base_offset)
        table = reader.scan().table
        src_segment = InputSegment(k, reader, table)
        is_control = table.is_control
        records = np.maximum(table.records_count, 0)
        stats.bytes_in += files.size
        actions = plan.actions[k]
        lo, hi = _relative(table.base_offset, plan), _relative(table.last_offset, plan)
        surviving = kept.count_in(lo, hi)
        # Batches are decided from the key map's counts where it can be done without decompressing
        # them (the key map framed their records already): a data batch with no surviving keyed
        # offset loses every record (superseded or null key) unless it is a RETAIN_EMPTY batch;
        # a v2 data batch all of whose records survive, none a tombstone, is kept whole. Legacy
        # wrappers are always decoded to learn their offsets.
        v2_data = (table.magic == 2) & ~is_control & ~plan.discard_records[k]
        whole = v2_data & (records > 0) & (surviving == records) & (tombstones.count_in(lo, hi) == 0)
        read = (
            whole
            | (surviving > 0)
            | is_control
            | (actions == BatchRetention.RETAIN_EMPTY)
            | (table.magic < 2)
        )
        for index in chunk_batches(table):
            act = actions[index]
            dropped = index[act == BatchRetention.DELETE]
            skipped = index[(act != BatchRetention.DELETE) & ~read[index]]
            aborted, superseded = int(records[dropped].sum()), int(records[skipped].sum())
            stats.aborted += aborted
            skipped_records += superseded
            stats.records_in += aborted + superseded
            stats.batches_dropped += len(dropped) + len(skipped)
            live = index[(act != BatchRetention.DELETE) & read[index]]
            if len(live) == 0:
                continue
            kept_whole = whole[live]
            framed = reader.frame(live[~kept_whole], arena)
            keep, reasons = _record_verdicts(framed, src_segment, live[~kept_whole], kept, plan, ctx.now_ms)
            stats.records_in += len(framed) + int(records[live[kept_whole]].sum())
            stats.superseded += reasons["superseded"]
            null_keys_decoded += reasons["null_key"]
            stats.tombstones += reasons["tombstone"]
            stats.markers += reasons["marker"]
            stats.aborted += reasons["aborted"]
            write_chunk(out, src_segment, live, kept_whole, framed, keep)
            fault_point("mid-rewrite")
    # Null-key records of skipped batches are known only from the key map's count.
    stats.null_keys = max(null_keys, null_keys_decoded)
    stats.superseded += skipped_records - (stats.null_keys - null_keys_decoded)
    [segment] = writer.close(plan.mtime_ms)
    stats.bytes_out = segment.size
    stats.seconds = time.perf_counter() - started
    return stats


def _relative(offsets: np.ndarray, plan: GroupPlan) -> np.ndarray:
    """Offsets relative to the group's base, as int32 like the key map's (clipped: a legacy
    wrapper's unknown base offset is −1)."""
    return np.clip(offsets - plan.base_offset, -1, INT32_MAX).astype(np.int32)


def _record_verdicts(
    framed: Framed, src: InputSegment, live: np.ndarray, kept: Survivors, plan: GroupPlan, now_ms: int
) -> tuple[np.ndarray, dict[str, int]]:
    """Which records of the framed batches stay, and why the others go, vectorised
    (docs/cleaning-rules.md#record-verdicts)."""
    table, k = src.table, src.k
    rb = framed.record_batch
    batch = live[rb]
    control = table.is_control[batch]
    discard = plan.discard_records[k][batch]
    has_key = framed.key_len >= 0
    in_map = kept.contains(_relative(framed.offset, plan))
    tomb = framed.value_len < 0
    legacy = table.magic[batch] < 2
    horizon_set = table.has_delete_horizon[batch]
    horizon = table.base_timestamp[batch]
    tomb_ok = np.where(legacy, plan.retain_legacy_deletes[k], ~horizon_set | (now_ms < horizon))
    data = ~control & ~discard
    keep_data = data & has_key & in_map & (~tomb | tomb_ok)
    keep = np.where(control, ~discard, keep_data)
    reasons = {
        "aborted": int((~control & discard).sum()),
        "null_key": int((data & ~has_key).sum()),
        "superseded": int((data & has_key & ~in_map).sum()),
        "tombstone": int((data & has_key & in_map & tomb & ~tomb_ok).sum()),
        "marker": int((control & discard).sum()),
    }
    return keep, reasons


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
    known to be kept `whole`, `keep` their verdicts. Decisions are vectorised over the chunk and
    every rewritten batch's records are re-based in one kernel call; per batch there is only the
    codec, the header and the append."""
    writer, plan, stats = out.writer, out.plan, out.stats
    reader, table, k = src.reader, src.table, src.k
    # Record ranges per batch of `live` (empty for whole batches, which were not framed).
    bounds = np.searchsorted(np.flatnonzero(~whole)[framed.record_batch], np.arange(len(live) + 1))
    records = np.where(whole, table.records_count[live], np.diff(bounds))
    kept = np.where(whole, records, _kept_per_batch(keep, bounds))
    control = table.is_control[live]
    tombs = np.where(control, 0, _kept_per_batch(keep & (framed.value_len < 0), bounds))
    v2 = table.magic[live] == 2
    horizon_set = table.has_delete_horizon[live]
    # A kept v2 batch gets a delete horizon when it keeps a tombstone or is a marker that can
    # later go, unless it has one; then it is rewritten even if every record stays.
    stamp = out.stamp_horizons & v2 & ~horizon_set & ((tombs > 0) | plan.discardable[k][live]) & (kept > 0)
    # A batch known to be kept `whole` (any magic; an empty one too) is copied as it is.
    verbatim = whole | (v2 & (kept > 0) & (kept == records) & ~stamp)
    rewrite = v2 & (kept > 0) & ~verbatim
    with_horizon = horizon_set | stamp
    chosen = np.flatnonzero(rewrite)
    sections, section_bounds, base_ts, largest_ts = rec.rebase_batches(
        framed.sections.data, framed.record_start, framed.body_start, framed.record_end, framed.timestamp,
        keep, bounds[chosen], bounds[chosen + 1],
        np.where(horizon_set, table.base_timestamp[live], out.horizon_new)[chosen], with_horizon[chosen],
    )  # fmt: skip
    stats.records_out += int(kept.sum())
    stats.horizons_stamped += int(stamp.sum())
    txn_by_marker = {t.last_offset: t for t in plan.txn_entries}
    cols = {name: getattr(table, name)[live].tolist() for name in _HEADER_COLUMNS}
    log_append = table.log_append_time[live].tolist()
    slot = np.cumsum(rewrite) - 1
    for j, i in enumerate(live.tolist()):
        base, last = cols["base_offset"][j], cols["last_offset"][j]
        if verbatim[j]:
            writer.append(reader.batch_bytes(i), base, last, cols["max_timestamp"][j])
            stats.batches_copied += 1
        elif kept[j] == 0:
            if plan.actions[k][i] != BatchRetention.RETAIN_EMPTY or not v2[j]:
                stats.batches_dropped += 1
                continue
            header = parse_v2_header(reader.batch_bytes(i))
            writer.append(build_empty_batch(header), base, last, header.max_timestamp)
            stats.batches_emptied += 1
        elif rewrite[j]:
            s = int(slot[j])
            attrs = cols["attributes"][j] & ~DELETE_HORIZON_MASK
            max_ts = cols["max_timestamp"][j] if log_append[j] else int(largest_ts[s])
            section = sections[section_bounds[s] : section_bounds[s + 1]]
            batch = build_v2_batch(
                base_offset=base,
                records=compress(Codec(attrs & CODEC_MASK), section, out.levels),
                records_count=int(kept[j]),
                last_offset_delta=last - base,
                base_timestamp=int(base_ts[s]),
                max_timestamp=max_ts,
                attributes=attrs | (DELETE_HORIZON_MASK if with_horizon[j] else 0),
                partition_leader_epoch=cols["leader_epoch"][j],
                producer_id=cols["producer_id"][j],
                producer_epoch=cols["producer_epoch"][j],
                base_sequence=cols["base_sequence"][j],
            )
            writer.append(batch, base, last, max_ts)
            stats.batches_rewritten += 1
        else:  # a kept legacy entry becomes a v2 batch (4.x)
            r0, r1 = int(bounds[j]), int(bounds[j + 1])
            horizon = out.horizon_new if tombs[j] else None
            stats.horizons_stamped += int(tombs[j] > 0)
            batch, base, last, max_ts = convert_legacy(
                table, i, framed, r0, r1, keep[r0:r1], horizon, out.levels
            )
            writer.append(batch, base, last, max_ts)
            stats.batches_rewritten += 1
        if control[j] and last in txn_by_marker:
            writer.append_aborted(txn_by_marker[last])
            stats.txn_indexed += 1


_HEADER_COLUMNS = (
    "base_offset", "last_offset", "max_timestamp", "attributes", "leader_epoch", "producer_id",
    "producer_epoch", "base_sequence",
)  # fmt: skip


def convert_legacy(
    table: BatchTable,
    i: int,
    framed: Framed,
    r0: int,
    r1: int,
    kmask: np.ndarray,
    horizon: int | None,
    levels: CompressionLevels,
) -> tuple[bytes, int, int, int]:
    """A kept v0/v1 entry becomes a v2 batch of its kept records, as Kafka 4.x converts them
    (docs/cleaning-rules.md#writing-kept-batches)."""
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

    cols = rec.RecordColumns.from_records(
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
    last = int(offsets[-1])
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
