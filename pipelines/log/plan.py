"""Pure planning (driver, no Spark): retention, log start offset, transaction and producer
state, the cleanable range and output groups, and every batch-level cleaner decision.

Inputs are per-segment header tables; outputs are small, JSON-able plans that workers execute.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipelines.config import JobConfig, TopicConfig
from pipelines.log.batch_writer import BatchRetention
from pipelines.log.cleanable import (
    first_uncleanable_offset,
    group_segments,
    log_end_offset,
)
from pipelines.log.retention import RetentionSegment, apply_retention
from pipelines.log.scan import EMPTY_CONTROL, ScannedSegment
from pipelines.log.selection import kafka_selection
from pipelines.log.transactions import (
    OpenTransaction,
    Producer,
    aborted_data_batches,
    first_open_transaction,
    producer_state,
)
from segment_io.format.constants import ControlType
from segment_io.index import AbortedTxn
from segment_io.layout import (
    CLEANER_CHECKPOINT,
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_CHECKPOINT,
    LogDirListing,
)
from segment_io.text import text_table
from segment_io.topic_partition import TopicPartition


@dataclass(frozen=True)
class GroupPlan:
    """One output segment: its inputs and the cleaner's batch-level decisions for them."""

    gid: int
    partition_dir: str
    base_offset: int
    segment_ids: tuple[int, ...]
    mtime_ms: int
    actions: tuple[np.ndarray, ...]  # per input segment, per batch: a BatchRetention
    discard_records: tuple[np.ndarray, ...]
    discardable: tuple[np.ndarray, ...]  # control batches that carry (or get) a delete horizon
    key_batches: tuple[np.ndarray, ...]  # batches whose keyed records take part in the key map
    retain_legacy_deletes: tuple[bool, ...]
    txn_entries: tuple[AbortedTxn, ...]  # aborted transactions indexed in the output, in marker order


@dataclass(frozen=True)
class CompactionPlan:
    first_dirty: int
    first_uncleanable: int
    end_offset: int
    groups: tuple[GroupPlan, ...]


@dataclass
class PartitionPlan:
    tp: TopicPartition
    config: TopicConfig
    log_end_offset: int
    high_watermark: int
    log_start_offset: int
    deleted: list[tuple[int, str]] = field(default_factory=list)  # (segment id, rule)
    copied: list[int] = field(default_factory=list)  # segment ids copied byte for byte
    roll_empty_at: int | None = None
    compaction: CompactionPlan | None = None
    input_bytes: int = 0
    deleted_bytes: int = 0
    stray_files: tuple[str, ...] = ()  # not Kafka's files: carried over unread
    selection: str | None = None  # with Kafka's selection: why the partition was (not) compacted
    # The open transaction that keeps part of the log from cleaning (the cleanable range would reach
    # further without it), None where none does.
    held_by: OpenTransaction | None = None

    def summary(self) -> dict[str, Any]:
        c = self.compaction
        return {
            "partition": str(self.tp),
            "cleanup_policy": sorted(self.config.cleanup_policy),
            "log_end_offset": self.log_end_offset,
            "high_watermark": self.high_watermark,
            "log_start_offset": self.log_start_offset,
            "segments_deleted": [{"segment": sid, "rule": rule} for sid, rule in self.deleted],
            "bytes_deleted_by_retention": self.deleted_bytes,
            "segments_copied": len(self.copied),
            "cleanable_range": None if c is None else [c.first_dirty, c.first_uncleanable],
            "groups": []
            if c is None
            else [{"base_offset": g.base_offset, "inputs": len(g.segment_ids)} for g in c.groups],
            "input_bytes": self.input_bytes,
            "stray_files": list(self.stray_files),
            "selection": self.selection,
            "held_by_transaction": None
            if self.held_by is None
            else {"producer_id": self.held_by.producer_id, "first_offset": self.held_by.first_offset},
        }


@dataclass(frozen=True)
class Checkpoints:
    log_start: int | None = None
    high_watermark: int | None = None
    cleaner: int | None = None


def plan_partition(
    tp: TopicPartition,
    segments: list[ScannedSegment],
    checkpoints: Checkpoints,
    config: TopicConfig,
    now_ms: int,
    next_gid: int = 0,
    select_kafka: bool = False,
    loaded: set[int] | None = None,
) -> PartitionPlan:
    """Everything the job will do to one partition, decided on headers alone. With
    `select_kafka`, a partition Kafka's cleaner would not choose now is carried over (see
    `selection`). `loaded`: the producers a broker loading the log knows (None: all it names);
    only those keep the empty header of their last batch."""
    leo = log_end_offset(segments)
    hw = leo if checkpoints.high_watermark is None else min(checkpoints.high_watermark, leo)
    first_base = segments[0].meta.base_offset if segments else 0
    log_start = max(checkpoints.log_start or 0, first_base)
    plan = PartitionPlan(tp, config, leo, hw, log_start, input_bytes=sum(s.meta.size for s in segments))

    retention = apply_retention(
        [RetentionSegment(s.meta.base_offset, s.meta.size, s.meta.largest_timestamp) for s in segments],
        leo,
        hw,
        log_start,
        config,
        now_ms,
    )
    gone = {i for i, _ in retention.deleted}
    plan.deleted = [(segments[i].meta.segment_id, rule) for i, rule in retention.deleted]
    plan.deleted_bytes = sum(segments[i].meta.size for i in gone)
    plan.log_start_offset = retention.log_start_offset
    plan.roll_empty_at = retention.roll_empty_at
    alive = [s for i, s in enumerate(segments) if i not in gone]
    if not config.compact or not alive:
        plan.copied = [s.meta.segment_id for s in alive]
        return plan

    state = producer_state(alive)
    open_firsts = [p.open_txn_first for p in state.values() if p.open_txn_first is not None]
    lso = min([hw, *open_firsts])
    first_dirty = checkpoints.cleaner
    if first_dirty is None or first_dirty < plan.log_start_offset or first_dirty > leo:
        first_dirty = plan.log_start_offset
    upper = first_uncleanable_offset(alive, first_dirty, lso, leo, config, now_ms)
    opened = first_open_transaction(state)
    if opened is not None and upper < first_uncleanable_offset(alive, first_dirty, hw, leo, config, now_ms):
        plan.held_by = opened
    if upper < first_dirty or upper <= alive[0].meta.base_offset:
        plan.copied = [s.meta.segment_id for s in alive]
        return plan
    if select_kafka:
        selected = kafka_selection(alive, first_dirty, upper, config, now_ms)
        plan.selection = selected.reason
        if not selected.chosen:
            plan.copied = [s.meta.segment_id for s in alive]
            return plan

    groups = group_segments(alive, upper, config)
    recopied = {k for g in groups for k in g}
    plan.copied = [s.meta.segment_id for k, s in enumerate(alive) if k not in recopied]
    decisions = _batch_decisions(alive, sorted(recopied), state, upper, config, now_ms, loaded)
    legacy_horizon = _legacy_horizon(alive, first_dirty, config)
    indexed = {(t.producer_id, t.last_offset): t for s in alive for t in s.meta.aborted}
    group_plans: list[GroupPlan] = []
    for g in groups:
        segs = [alive[k] for k in g]
        entries = []
        for k in g:
            for marker_offset, pid, first_data in decisions.indexed_aborts.get(k, []):
                derived = AbortedTxn(pid, first_data, marker_offset, marker_offset + 1)
                entries.append(indexed.get((pid, marker_offset), derived))
        group_plans.append(
            GroupPlan(
                gid=next_gid + len(group_plans),
                partition_dir=tp.dir_name,
                base_offset=segs[0].meta.base_offset,
                segment_ids=tuple(s.meta.segment_id for s in segs),
                mtime_ms=segs[-1].meta.mtime_ms,
                actions=tuple(decisions.actions[k] for k in g),
                discard_records=tuple(decisions.discard_records[k] for k in g),
                discardable=tuple(decisions.discardable[k] for k in g),
                key_batches=tuple(decisions.key_batches[k] for k in g),
                retain_legacy_deletes=tuple(s.meta.mtime_ms > legacy_horizon for s in segs),
                txn_entries=tuple(entries),
            )
        )
    plan.compaction = CompactionPlan(first_dirty, upper, upper, tuple(group_plans))
    return plan


@dataclass
class _Decisions:
    actions: dict[int, np.ndarray] = field(default_factory=dict)
    discard_records: dict[int, np.ndarray] = field(default_factory=dict)
    discardable: dict[int, np.ndarray] = field(default_factory=dict)
    key_batches: dict[int, np.ndarray] = field(default_factory=dict)
    indexed_aborts: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)


def _batch_decisions(
    segments: list[ScannedSegment],
    recopied: list[int],
    state: dict[int, Producer],
    upper: int,
    config: TopicConfig,
    now_ms: int,
    loaded: set[int] | None,
) -> _Decisions:
    """The transaction tracker and the batch actions, in offset order
    (docs/cleaning-rules.md#transactions, #batch-actions)."""
    aborted = aborted_data_batches(segments)
    # The producers Kafka's cleaner sees as active: those its broker holds (loaded, and not expired).
    active = {
        pid: p
        for pid, p in state.items()
        if (loaded is None or pid in loaded)
        and (p.open_txn_first is not None or now_ms - p.last_timestamp < config.producer_id_expiration_ms)
    }
    pending: dict[int, list[int]] = {}  # producer → offsets of data batches seen since its last marker
    active_pids = np.array(sorted(active), dtype=np.int64)
    active_last = np.array(
        [_or_minus_one(active[p].last_data_offset) for p in active_pids.tolist()],
        dtype=np.int64,
    )
    out = _Decisions()
    for k in recopied:
        s = segments[k]
        t = s.table
        n = len(t)
        control = t.is_control
        transactional = t.is_transactional
        horizon_set = t.has_delete_horizon
        actions = np.full(n, BatchRetention.DELETE_EMPTY, dtype=np.int8)
        discard_records = aborted[k].copy()
        discardable = np.zeros(n, dtype=np.bool_)
        # Last batch of an active producer whose last data offset is known: vectorised.
        slot = np.clip(np.searchsorted(active_pids, t.producer_id), 0, max(len(active_pids) - 1, 0))
        known = (
            (t.producer_id >= 0) & (active_pids[slot] == t.producer_id) & (active_last[slot] == t.last_offset)
            if len(active_pids)
            else np.zeros(n, dtype=np.bool_)
        )
        # The transaction tracker only concerns transactional batches and markers.
        for i in np.flatnonzero(control | (transactional & (t.producer_id >= 0))).tolist():
            pid = int(t.producer_id[i])
            last = int(t.last_offset[i])
            if control[i]:
                ctype = int(s.controls[i])
                seen = pending.pop(pid, [])
                if ctype == EMPTY_CONTROL or int(t.records_count[i]) == 0:
                    discardable[i] = True
                elif ctype == ControlType.ABORT:
                    discardable[i] = not seen
                    if seen:
                        out.indexed_aborts.setdefault(k, []).append((last, pid, seen[0]))
                elif ctype == ControlType.COMMIT:
                    discardable[i] = not seen
                horizon = int(t.base_timestamp[i]) if horizon_set[i] else None
                discard_records[i] = discardable[i] and horizon is not None and horizon <= now_ms
                p = active.get(pid)
                if p is not None and p.last_data_offset is None and int(t.producer_epoch[i]) == p.epoch:
                    known[i] = True
            else:
                pending.setdefault(pid, []).append(int(t.base_offset[i]))
        actions[discard_records] = BatchRetention.DELETE
        actions[known | (t.last_offset + 1 == upper)] = BatchRetention.RETAIN_EMPTY
        out.actions[k] = actions
        out.discard_records[k] = discard_records
        out.discardable[k] = discardable
        out.key_batches[k] = np.flatnonzero(~control & ~discard_records & (actions != BatchRetention.DELETE))
    return out


def _or_minus_one(value: int | None) -> int:
    return -1 if value is None else value


def _legacy_horizon(segments: list[ScannedSegment], first_dirty: int, config: TopicConfig) -> int:
    """mtime of the last segment entirely below the first dirty offset − delete.retention.ms
    (docs/cleaning-rules.md#delete-horizons, the legacy rule)."""
    horizon = 0
    for k, s in enumerate(segments):
        nxt = segments[k + 1].meta.base_offset if k + 1 < len(segments) else None
        if nxt is not None and nxt <= first_dirty:
            horizon = s.meta.mtime_ms - config.delete_retention_ms
    return horizon


def plan_log(
    listing: LogDirListing,
    segments: dict[TopicPartition, list[ScannedSegment]],
    config: JobConfig,
    now_ms: int,
    select_kafka: bool = False,
    known: Mapping[TopicPartition, set[int] | None] | None = None,
) -> list[PartitionPlan]:
    """Every partition's plan, from its scanned segments and the root checkpoints (output group
    ids are unique across the log); `known`: per partition, the producers a broker loading it
    knows (producers.known_producers_of)."""
    cps = listing.checkpoints
    plans = []
    gid = 0
    for part in listing.partitions:
        tp = part.tp
        checkpoints = Checkpoints(
            log_start=cps.get(LOG_START_CHECKPOINT, {}).get(tp),
            high_watermark=cps.get(HIGH_WATERMARK_CHECKPOINT, {}).get(tp),
            cleaner=cps.get(CLEANER_CHECKPOINT, {}).get(tp),
        )
        plan = plan_partition(
            tp,
            segments[tp],
            checkpoints,
            config.for_topic(tp.topic),
            now_ms,
            gid,
            select_kafka,
            None if known is None else known.get(tp),
        )
        plan.stray_files = part.stray_files
        if plan.compaction:
            gid += len(plan.compaction.groups)
        plans.append(plan)
    return plans


def plan_table(summaries: list[dict[str, Any]]) -> list[str]:
    """The dry run's plan for people: one row per partition (segments kept and deleted by which
    rule, the cleanable range, output groups, bytes)."""
    header = (
        "partition",
        "policy",
        "segments",
        "kept",
        "deleted (rule)",
        "cleanable range",
        "groups",
        "MB in",
    )
    rows = [header]
    for p in summaries:
        deleted = p["segments_deleted"]
        rules: dict[str, int] = {}
        for d in deleted:
            rules[d["rule"]] = rules.get(d["rule"], 0) + 1
        kept = p["segments_copied"] + sum(g["inputs"] for g in p["groups"])
        span = p["cleanable_range"]
        rows.append(
            (
                p["partition"],
                ",".join(p["cleanup_policy"]),
                str(kept + len(deleted)),
                str(kept),
                ", ".join(f"{n} ({rule})" for rule, n in sorted(rules.items())) or "0",
                "-" if span is None else f"[{span[0]}, {span[1]})",
                str(len(p["groups"])),
                f"{p['input_bytes'] / 2**20:,.1f}",
            )
        )
    return text_table(rows)
