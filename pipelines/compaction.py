"""Pass 2 of compaction: recopy one output group (spec §3.3–§3.5), given the group's surviving
keyed offsets from the key map (pipelines.keymap). Plain Python over segment_io; batches in
which no record survives are dropped from their headers alone, without decompression."""

from __future__ import annotations

import posixpath
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipelines.config import TopicConfig
from pipelines.keymap import NullKeys
from pipelines.plan import DELETE, RETAIN_EMPTY, GroupPlan
from segment_io import records as rec
from segment_io.batch import (
    CODEC_MASK,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    Codec,
    build_empty_batch,
    build_v2_batch,
    parse_v2_header,
)
from segment_io.compression import CompressionLevels, compress
from segment_io.index import AbortedTxn
from segment_io.layout import SegmentFiles
from segment_io.segment import Arena, Framed, SegmentLimits, SegmentReader, SegmentWriter, chunk_batches
from segment_io.storage import Storage

CHUNK_BYTES = 4 * 1024 * 1024


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


def _levels(config: TopicConfig) -> CompressionLevels:
    return CompressionLevels(gzip=config.gzip_level, lz4=config.lz4_level, zstd=config.zstd_level)


def rewrite_groups(
    items: Iterable[tuple[int, np.ndarray | NullKeys | None]],
    groups: dict[int, GroupPlan],
    ctx: RewriteContext,
) -> Iterator[GroupStats]:
    """One reduce task of the group shuffle: gather each group's surviving offsets and null-key
    counts from the key map (a `None` item only announces the group), then rewrite it."""
    offsets: dict[int, list[np.ndarray]] = {}
    null_keys: dict[int, int] = {}
    for gid, item in items:
        mine = offsets.setdefault(gid, [])
        if isinstance(item, NullKeys):
            null_keys[gid] = null_keys.get(gid, 0) + item.count
        elif item is not None:
            mine.append(item)
    for gid in sorted(offsets):
        kept = np.concatenate(offsets[gid]) if offsets[gid] else np.zeros(0, dtype=np.int32)
        offsets[gid].clear()
        yield rewrite_group(groups[gid], kept, null_keys.get(gid, 0), ctx)


def rewrite_group(
    plan: GroupPlan, kept_offsets: np.ndarray, null_keys: int, ctx: RewriteContext
) -> GroupStats:
    """Recopy one group of input segments into one output segment (spec §3.3–§3.5).

    `kept_offsets`: the group's keyed records that the key map keeps, relative to the group's
    base offset (int32, sorted here in place); `null_keys`: how many
    null-key records the key map saw in the group (for the report)."""
    started = time.perf_counter()
    config = ctx.configs[plan.partition_dir]
    src, _ = Storage.for_url(ctx.src_url)
    out, out_root = Storage.for_url(ctx.staging_url)
    kept = kept_offsets.astype(np.int32, copy=False)
    kept.sort()
    stats = GroupStats(plan.gid, plan.partition_dir, plan.base_offset)
    limits = SegmentLimits(2**62, config.segment_index_bytes * 2**20, config.index_interval_bytes)
    writer = SegmentWriter(out, posixpath.join(out_root, plan.partition_dir), limits)
    writer.roll(plan.base_offset)
    txn_by_marker = {e[2]: e for e in plan.txn_entries}
    levels = _levels(config)
    horizon_new = ctx.now_ms + config.delete_retention_ms
    skipped_records = 0
    null_keys_decoded = 0
    arena = Arena()
    for k, sid in enumerate(plan.segment_ids):
        files = ctx.segments[sid]
        reader = SegmentReader(src, files.log.path, files.base_offset)
        table = reader.scan().table
        is_control = table.is_control
        records = np.maximum(table.records_count, 0)
        stats.bytes_in += files.size
        actions = plan.actions[k]
        # A data batch with no surviving keyed offset loses every record (superseded or null
        # key) unless it is a RETAIN_EMPTY batch; legacy wrappers are decoded to learn their
        # offsets. Such batches are dropped without being decompressed.
        survivors = np.searchsorted(kept, _relative(table.base_offset, plan), "left") < np.searchsorted(
            kept, _relative(table.last_offset, plan), "right"
        )
        decode = survivors | is_control | (actions == RETAIN_EMPTY) | (table.magic < 2)
        for index in chunk_batches(table, CHUNK_BYTES):
            act = actions[index]
            dropped = index[act == DELETE]
            stats.aborted += int(records[dropped].sum())
            stats.records_in += int(records[dropped].sum())
            stats.batches_dropped += len(dropped)
            skipped = index[(act != DELETE) & ~decode[index]]
            skipped_records += int(records[skipped].sum())
            stats.records_in += int(records[skipped].sum())
            stats.batches_dropped += len(skipped)
            live = index[(act != DELETE) & decode[index]]
            if len(live) == 0:
                continue
            framed = reader.frame(live, arena)
            keep, reasons = _record_verdicts(framed, table, live, kept, plan, k, ctx.now_ms)
            stats.records_in += len(framed)
            stats.superseded += reasons["superseded"]
            null_keys_decoded += reasons["null_key"]
            stats.tombstones += reasons["tombstone"]
            stats.markers += reasons["marker"]
            stats.aborted += reasons["aborted"]
            starts = np.searchsorted(framed.record_batch, np.arange(len(live) + 1))
            for j, i in enumerate(live.tolist()):
                r0, r1 = int(starts[j]), int(starts[j + 1])
                written = _write_batch(
                    writer, reader, table, i, framed, keep, r0, r1, plan, k, stats, levels, horizon_new
                )
                if written and is_control[i] and int(table.last_offset[i]) in txn_by_marker:
                    e = txn_by_marker[int(table.last_offset[i])]
                    writer.append_aborted(AbortedTxn(*e))
                    stats.txn_indexed += 1
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
    return np.clip(offsets - plan.base_offset, -1, 2**31 - 1).astype(np.int32)


def _record_verdicts(
    framed: Framed,
    table: Any,
    live: np.ndarray,
    kept: np.ndarray,
    plan: GroupPlan,
    k: int,
    now_ms: int,
) -> tuple[np.ndarray, dict[str, int]]:
    """Spec §3.3.3 for every record of the framed batches, vectorised."""
    rb = framed.record_batch
    batch = live[rb]
    control = table.is_control[batch]
    discard = plan.discard_records[k][batch]
    has_key = framed.key_len >= 0
    relative = _relative(framed.offset, plan)
    pos = np.searchsorted(kept, relative)
    in_map = (
        (pos < len(kept)) & (kept[np.minimum(pos, len(kept) - 1)] == relative)
        if len(kept)
        else (np.zeros(len(framed), dtype=np.bool_))
    )
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


def _write_batch(
    writer: SegmentWriter,
    reader: SegmentReader,
    table: Any,
    i: int,
    framed: Framed,
    keep: np.ndarray,
    r0: int,
    r1: int,
    plan: GroupPlan,
    k: int,
    stats: GroupStats,
    levels: CompressionLevels,
    horizon_new: int,
) -> bool:
    """Copy, rewrite, empty or drop batch `i`; returns whether a batch was written."""
    kmask = keep[r0:r1]
    n_kept = int(kmask.sum())
    magic = int(table.magic[i])
    control = magic == 2 and bool(table.attributes[i] & CONTROL_MASK)
    stats.records_out += n_kept
    if n_kept == 0:
        if plan.actions[k][i] == RETAIN_EMPTY and magic == 2:
            header = parse_v2_header(reader.batch_bytes(i))
            _append(
                writer,
                build_empty_batch(header),
                header.base_offset,
                header.last_offset,
                header.max_timestamp,
            )
            stats.batches_emptied += 1
            return True
        stats.batches_dropped += 1
        return False
    tombs = (framed.value_len[r0:r1] < 0) & kmask & (not control)
    if magic == 2:
        header = parse_v2_header(reader.batch_bytes(i))
        stamp = not header.has_delete_horizon and (bool(tombs.any()) or bool(plan.discardable[k][i]))
        if n_kept == r1 - r0 and not stamp:
            _append(
                writer, reader.batch_bytes(i), header.base_offset, header.last_offset, header.max_timestamp
            )
            stats.batches_copied += 1
            return True
        horizon = header.delete_horizon_ms if header.has_delete_horizon else (horizon_new if stamp else None)
        stats.horizons_stamped += int(stamp)
        batch = rewrite_v2(header, framed, r0, r1, kmask, horizon, levels)
        _append(writer, batch, header.base_offset, header.last_offset, parse_v2_header(batch).max_timestamp)
    else:
        stamp = bool(tombs.any())
        stats.horizons_stamped += int(stamp)
        batch, base, last, max_ts = convert_legacy(
            table, i, framed, r0, r1, kmask, horizon_new if stamp else None, levels
        )
        _append(writer, batch, base, last, max_ts)
    stats.batches_rewritten += 1
    return True


def _append(writer: SegmentWriter, batch: bytes | memoryview, base: int, last: int, max_ts: int) -> None:
    writer.append(batch, base, last, max_ts)


def rewrite_v2(
    header: BatchHeader,
    framed: Framed,
    r0: int,
    r1: int,
    kmask: np.ndarray,
    horizon: int | None,
    levels: CompressionLevels,
) -> bytes:
    """Spec §3.4: same offsets, producer fields and flags; kept records re-based to the first kept
    record's timestamp (or to the delete horizon); recompressed with the original codec."""
    ts = framed.timestamp[r0:r1]
    log_append = bool(header.attributes & TIMESTAMP_TYPE_MASK)
    base_ts = horizon if horizon is not None else int(ts[kmask][0])
    section = rec.rebase_records(
        framed.sections.data,
        framed.record_start[r0:r1],
        framed.body_start[r0:r1],
        framed.record_end[r0:r1],
        ts,
        kmask,
        base_ts,
    )
    attrs = header.attributes & ~DELETE_HORIZON_MASK
    if horizon is not None:
        attrs |= DELETE_HORIZON_MASK
    max_ts = header.max_timestamp if log_append else int(ts[kmask].max())
    return build_v2_batch(
        base_offset=header.base_offset,
        records=compress(Codec(header.attributes & CODEC_MASK), section, levels),
        records_count=int(kmask.sum()),
        last_offset_delta=header.last_offset_delta,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        attributes=attrs,
        partition_leader_epoch=header.partition_leader_epoch,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
    )


def convert_legacy(
    table: Any,
    i: int,
    framed: Framed,
    r0: int,
    r1: int,
    kmask: np.ndarray,
    horizon: int | None,
    levels: CompressionLevels,
) -> tuple[bytes, int, int, int]:
    """Spec §3.4, 4.x (KAFKA-13093): a kept v0/v1 entry becomes a v2 batch of its kept records."""
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
