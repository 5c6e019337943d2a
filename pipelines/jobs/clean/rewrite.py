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
from pipelines.jobs.clean.record_cache import RecordCache, frame_chunk
from pipelines.log.batch_writer import BatchRetention, InputSegment, OutputSegment, WriteCounts, write_chunk
from pipelines.log.plan import GroupPlan
from pipelines.runtime.faults import fault_point
from segment_io.format.compression import CompressionLevels
from segment_io.format.constants import INT32_MAX
from segment_io.layout import SegmentFiles
from segment_io.segment.framing import Framed, chunk_batches
from segment_io.segment.reader import SegmentReader
from segment_io.segment.scan import BatchTable
from segment_io.segment.sections import Arena
from segment_io.segment.writer import SegmentLimits, SegmentWriter
from segment_io.storage import Location

# ---------------------------------------------------------------------------------------------
# Rewrite


@dataclass(frozen=True)
class RewriteContext:
    """What a rewrite task needs besides its group plan."""

    src: Location
    staging: Location
    segments: dict[int, SegmentFiles]
    now_ms: int
    configs: dict[str, TopicConfig]  # by partition directory


@dataclass(kw_only=True)
class GroupStats(WriteCounts):
    """What one rewrite task did (the report sums these per partition)."""

    gid: int
    partition_dir: str
    base_offset: int
    bytes_in: int = 0
    bytes_out: int = 0
    records_in: int = 0
    superseded: int = 0
    tombstones: int = 0
    aborted: int = 0
    null_keys: int = 0
    markers: int = 0
    seconds: float = 0.0


def _levels(config: TopicConfig) -> CompressionLevels:
    return CompressionLevels(gzip=config.gzip_level, lz4=config.lz4_level, zstd=config.zstd_level)


def rewrite_groups(
    items: Iterable[tuple[int, np.ndarray | Tombstones | NullKeys | None]],
    groups: dict[int, GroupPlan],
    ctx: RewriteContext,
    cache: RecordCache | None = None,
) -> Iterator[GroupStats]:
    """One reduce task of the group shuffle: gather each group's surviving offsets, which of them
    are tombstones, and null-key counts from the key map (a `None` item only announces the
    group), then rewrite it (from the `cache` of the key pass's records where it can)."""
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
        yield rewrite_group(groups[gid], survivors.pop(gid), tombs, null_keys.get(gid, 0), ctx, cache)


def rewrite_group(
    plan: GroupPlan,
    kept: Survivors,
    tombstones: Survivors,
    null_keys: int,
    ctx: RewriteContext,
    cache: RecordCache | None = None,
) -> GroupStats:
    """Recopy one group of input segments into one output segment.

    `kept`: the group's keyed records that the key map keeps, `tombstones`: which of them are
    tombstones; `null_keys`: how many null-key records the key map saw in the group (for the
    report); `cache`: records the key pass kept decoded (record_cache.py)."""
    started = time.perf_counter()
    config = ctx.configs[plan.partition_dir]
    src, dst, dst_root = ctx.src.storage, ctx.staging.storage, ctx.staging.path
    stats = GroupStats(gid=plan.gid, partition_dir=plan.partition_dir, base_offset=plan.base_offset)
    limits = SegmentLimits(2**62, config.segment_index_bytes * 2**20, config.index_interval_bytes)
    writer = SegmentWriter(dst, posixpath.join(dst_root, plan.partition_dir), limits)
    writer.roll(plan.base_offset)
    txn_by_marker = {t.last_offset: t for t in plan.txn_entries}
    out = OutputSegment(
        writer, stats, _levels(config), ctx.now_ms + config.delete_retention_ms, txn_by_marker
    )
    skipped_records = 0
    null_keys_decoded = 0
    arena = Arena()
    for k, sid in enumerate(plan.segment_ids):
        files = ctx.segments[sid]
        opened = cache.take_reader(files.log.path) if cache is not None else None
        reader = opened if opened is not None else SegmentReader(src, files.log.path, files.base_offset)
        table = reader.scan().table
        src_segment = InputSegment(reader, table, plan.actions[k], plan.discardable[k])
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
            need = live[~kept_whole]
            if cache is None:
                framed, left_out = reader.frame(need, arena), 0
            else:
                cached = cache.records(files.log.path, need)
                in_map = kept.contains(_relative(cached.offset, plan))
                framed, left_out = frame_chunk(
                    reader, arena, need, records[need], cached, v2_data[need], surviving[need], in_map
                )
            keep, reasons = _record_verdicts(framed, table, k, need, kept, plan, ctx.now_ms)
            # Records of cached batches left out are superseded or null-key, like skipped ones.
            skipped_records += left_out
            stats.records_in += len(framed) + left_out + int(records[live[kept_whole]].sum())
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
    framed: Framed, table: BatchTable, k: int, live: np.ndarray, kept: Survivors, plan: GroupPlan, now_ms: int
) -> tuple[np.ndarray, dict[str, int]]:
    """Which records of the `k`-th input's framed batches stay, and why the others go, vectorised
    (docs/cleaning-rules.md#record-verdicts)."""
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
