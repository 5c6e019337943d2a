"""What `tier` does to one partition, decided on segment metadata and the newest remote manifest
alone (docs/remote-tier.md#what-tier-does):

- **upload**: the local segments above the remote tier's end, in offset order, while a segment
  is inactive (never the last one, unless `segpipe.last.segment.sealed`) and ends below the last
  stable offset (min of the high watermark and the first offset of every open transaction);
- **total retention** (`retention.ms`, `retention.bytes`, log start offset) over the remote
  segments followed by the local ones above them, as one log: Kafka's rules, unchanged;
- **local release** (`local.retention.ms` / `local.retention.bytes`, -2 = `retention.*`): the
  same rules over the local segments, limited to those whose copy is remote once this run has
  committed, so that every record stays in at least one tier.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pipelines.config.topic import TopicConfig
from pipelines.log.retention import RetentionSegment, apply_retention
from pipelines.log.scan import ScannedSegment
from pipelines.log.transactions import OpenTransaction, first_open_transaction, producer_state
from segment_io.layout import segment_file_name
from segment_io.remote.manifest import PartitionManifest, RemoteSegment
from segment_io.text import counted, text_table
from segment_io.topic_partition import TopicPartition


@dataclass(frozen=True)
class Upload:
    """A local segment to upload: its scan id and the end offset the remote tier records."""

    segment_id: int
    base_offset: int
    end_offset: int


@dataclass
class TierPlan:
    tp: TopicPartition
    log_end_offset: int
    last_stable_offset: int
    log_start_offset: int
    uploads: list[Upload] = field(default_factory=list)
    remote_deleted: list[tuple[str, str]] = field(default_factory=list)  # (remote segment id, rule)
    local_deleted: list[tuple[int, str]] = field(default_factory=list)  # (local segment id, rule)
    local_released: list[tuple[int, str]] = field(default_factory=list)  # (local segment id, rule)
    # Remote segments the local log replaces from some offset on (see `replacing_from`).
    remote_superseded: list[str] = field(default_factory=list)
    held: str | None = None  # why nothing of the partition is changed this run
    newest_timestamp: int = -1  # the largest timestamp of the log, both tiers (for warnings)
    held_by: OpenTransaction | None = None  # the open transaction that keeps segments from upload

    @property
    def changes_remote(self) -> bool:
        return bool(self.uploads or self.remote_deleted or self.remote_superseded)

    def summary(self) -> dict[str, Any]:
        return {
            "partition": str(self.tp),
            "log_end_offset": self.log_end_offset,
            "last_stable_offset": self.last_stable_offset,
            "log_start_offset": self.log_start_offset,
            "upload": [u.base_offset for u in self.uploads],
            "remote_deleted": [{"segment_id": s, "rule": r} for s, r in self.remote_deleted],
            "local_deleted": len(self.local_deleted),
            "local_released": len(self.local_released),
            "remote_superseded": list(self.remote_superseded),
            "held": self.held,
            "held_by_transaction": None
            if self.held_by is None
            else {"producer_id": self.held_by.producer_id, "first_offset": self.held_by.first_offset},
        }


def _next_bases(segments: list[ScannedSegment], leo: int) -> list[int]:
    """Each segment's upper bound: the next segment's base, the log end for the last."""
    return [s.meta.base_offset for s in segments[1:]] + [leo]


def log_end_offset(local: list[ScannedSegment], remote: PartitionManifest) -> int:
    """The log end offset of the two tiers read as one log."""
    return max(
        [int(s.table.last_offset.max()) + 1 for s in local if len(s.table)]
        + [s.meta.base_offset for s in local[-1:]]
        + ([remote.next_offset] if remote.segments else [])
        + [0]
    )


def replacing_from(
    local: list[ScannedSegment], remote: PartitionManifest, leo: int, log_start: int
) -> int | None:
    """The index of the first local segment (above the log start offset) that lies in the remote
    tier's range without being a copy of a remote segment: from there the local log replaces the
    remote one (a local compaction merged segments since they were tiered), or the two differ. A
    local segment that an in-place clean compacted inside the tier is neither: it stays shadowed."""
    if not remote.segments:
        return None
    uppers = _next_bases(local, leo)
    for k, s in enumerate(local):
        if s.meta.base_offset >= remote.next_offset:
            return None
        base, upper = s.meta.base_offset, uppers[k]
        if (
            upper <= log_start
            or remote.copy_of(base, upper, s.meta.size)
            or remote.rewritten_in_tier(base, upper)
        ):
            continue
        return k
    return None


def plan_tier(
    tp: TopicPartition,
    local: list[ScannedSegment],
    remote: PartitionManifest,
    config: TopicConfig,
    log_start_checkpoint: int | None,
    high_watermark: int | None,
    now_ms: int,
) -> TierPlan:
    remote_end = remote.next_offset if remote.segments else None
    leo = log_end_offset(local, remote)
    hw = leo if high_watermark is None else min(high_watermark, leo)
    state = producer_state(local)
    open_firsts = [p.open_txn_first for p in state.values() if p.open_txn_first is not None]
    lso = min([hw, *open_firsts])
    first = remote.segments[0].base_offset if remote.segments else (local[0].meta.base_offset if local else 0)
    log_start = max(log_start_checkpoint or 0, remote.log_start_offset, first)
    plan = TierPlan(tp, leo, lso, log_start)

    uppers = _next_bases(local, leo)
    replacing = replacing_from(local, remote, leo, log_start)
    kept_remote = list(remote.segments)
    if replacing is None:
        # Local segments the remote tier holds are shadowed; the rest are the local log.
        fresh = [k for k, s in enumerate(local) if remote_end is None or s.meta.base_offset >= remote_end]
    else:
        point = local[replacing].meta.base_offset
        if point not in {s.base_offset for s in remote.segments} and point > remote.segments[0].base_offset:
            plan.held = (
                f"local segment {segment_file_name(point, 'log')} [{point}, {uppers[replacing] - 1}] is not "
                "a copy of the remote segments it overlaps and does not start where one of them starts; "
                "nothing of this partition is tiered, released or deleted"
            )
            return plan
        kept_remote = [s for s in remote.segments if s.base_offset < point]
        plan.remote_superseded += [s.segment_id for s in remote.segments if s.base_offset >= point]
        fresh = list(range(replacing, len(local)))
    combined = [RetentionSegment(s.base_offset, s.size, s.largest_timestamp) for s in kept_remote] + [
        RetentionSegment(local[k].meta.base_offset, local[k].meta.size, local[k].meta.largest_timestamp)
        for k in fresh
    ]
    plan.newest_timestamp = max((c.largest_timestamp for c in combined), default=-1)
    total = apply_retention(combined, leo, hw, log_start, config, now_ms)
    plan.log_start_offset = total.log_start_offset
    fresh_rule: dict[int, str] = {}
    for i, rule in total.deleted:
        if i < len(kept_remote):
            plan.remote_deleted.append((kept_remote[i].segment_id, rule))
        else:
            fresh_rule[fresh[i - len(kept_remote)]] = rule
    # Below the new log start offset nothing stays, in either tier.
    for k, s in enumerate(local):
        if k in fresh_rule or uppers[k] <= plan.log_start_offset:
            plan.local_deleted.append((s.meta.segment_id, fresh_rule.get(k, "log_start_offset")))
    deleted_local = {sid for sid, _ in plan.local_deleted}

    last_index = len(local) if config.last_segment_sealed else len(local) - 1
    for k in fresh:
        s = local[k]
        if s.meta.segment_id in deleted_local:
            continue
        if k >= last_index or uppers[k] > lso:
            if k < last_index and uppers[k] <= hw:  # only an open transaction holds this one back
                plan.held_by = first_open_transaction(state)
            break
        plan.uploads.append(Upload(s.meta.segment_id, s.meta.base_offset, uppers[k] - 1))

    gone = {sid for sid, _ in plan.remote_deleted}
    remote_after = max(
        [s.end_offset + 1 for s in kept_remote if s.segment_id not in gone]
        + [u.end_offset + 1 for u in plan.uploads]
        + [plan.log_start_offset]
    )
    if replacing is not None and remote_end is not None and remote_after < remote_end:
        # The remote tier never shrinks: what replaces remote segments is uploaded whole first.
        waiting = TierPlan(tp, leo, lso, log_start)
        waiting.held = (
            f"the local segments from offset {local[replacing].meta.base_offset} replace remote segments "
            f"up to offset {remote_end - 1}, but only offsets below {remote_after} can be uploaded now "
            "(the active segment or an open transaction holds the rest); nothing of this partition "
            "is tiered, released or deleted until they can"
        )
        return waiting
    kept = [(k, s) for k, s in enumerate(local) if s.meta.segment_id not in deleted_local]
    local_ms, local_bytes = config.local_retention
    local_rules = replace(
        config, cleanup_policy=frozenset({"delete"}), retention_ms=local_ms, retention_bytes=local_bytes
    )
    release = apply_retention(
        [RetentionSegment(s.meta.base_offset, s.meta.size, s.meta.largest_timestamp) for _, s in kept],
        leo,
        min(hw, remote_after),  # only what is remote after this run may go
        plan.log_start_offset,
        local_rules,
        now_ms,
    )
    plan.local_released = [(kept[i][1].meta.segment_id, f"local_{rule}") for i, rule in release.deleted]
    return plan


def new_history(remote: PartitionManifest) -> PartitionManifest:
    """What a partition's remote log is planned from when a deliberately different log starts a
    new history there: nothing of the old one (its objects expire after the grace period)."""
    return replace(
        remote,
        segments=(),
        log_start_offset=0,
        leader_epochs=(),
        partition_metadata=None,
        cleaner_offset=None,
    )


def next_manifest(
    remote: PartitionManifest,
    plan: TierPlan,
    uploaded: list[RemoteSegment],
    leader_epochs: tuple[tuple[int, int], ...] | None,
    partition_metadata: str | None,
    now_ms: int,
) -> PartitionManifest:
    """The version this run commits: retention's survivors, then the new uploads."""
    gone = {sid for sid, _ in plan.remote_deleted} | set(plan.remote_superseded)
    segments = tuple(s for s in remote.segments if s.segment_id not in gone) + tuple(uploaded)
    return remote.successor(
        now_ms,
        segments=segments,
        log_start_offset=plan.log_start_offset,
        leader_epochs=leader_epochs if leader_epochs is not None else remote.leader_epochs,
        partition_metadata=partition_metadata
        if partition_metadata is not None
        else remote.partition_metadata,
        note="tier",
    )


def tier_plan_table(summaries: list[dict[str, Any]]) -> list[str]:
    """The dry run's plan for people, one row per partition, in the conditional: what the run
    would upload, delete by which rule, release and supersede, or why it would leave a partition."""
    rows: list[tuple[str, ...]] = [
        (
            "partition",
            "log start",
            "log end",
            "would upload",
            "would delete (rule)",
            "would release",
            "would supersede",
            "held back",
        )
    ]
    for p in summaries:
        uploads = p["upload"]
        rules: dict[str, int] = {}
        for d in p["remote_deleted"]:
            rules[f"remote {d['rule']}"] = rules.get(f"remote {d['rule']}", 0) + 1
        deleted = ", ".join(f"{n} ({rule})" for rule, n in sorted(rules.items()))
        local = f"{p['local_deleted']} local" if p["local_deleted"] else ""
        rows.append(
            (
                p["partition"],
                str(p["log_start_offset"]),
                str(p["log_end_offset"]),
                f"{counted(len(uploads), 'segment')} from {uploads[0]}" if uploads else "0",
                ", ".join(x for x in (deleted, local) if x) or "0",
                str(p["local_released"]),
                str(len(p["remote_superseded"])),
                "yes (see the warning)" if p["held"] else "",
            )
        )
    return text_table(rows)
