"""The planner on hand-built segment metadata, one cleaner rule per test
(docs/cleaning-rules.md: first dirty and first uncleanable offsets, grouping, transactions, batch
actions, delete horizons). No files, no Spark: segments are header tables as the scan returns them."""

from __future__ import annotations

import pytest

from pipelines.config import JobConfig, TopicConfig
from pipelines.log.plan import BatchRetention, Checkpoints, PartitionPlan, plan_partition
from pipelines.log.scan import ScannedSegment
from segment_io.format.constants import ControlType
from segment_io.index import AbortedTxn
from segment_io.topic_partition import TopicPartition
from tests.scanned import T0, data, marker, segment, txn

pytestmark = pytest.mark.unit

NOW = T0 + 3_600_000
DAY = 86_400_000
TP = TopicPartition("t", 0)
DELETE, DELETE_EMPTY, RETAIN_EMPTY = (
    BatchRetention.DELETE,
    BatchRetention.DELETE_EMPTY,
    BatchRetention.RETAIN_EMPTY,
)


def compact(**values: object) -> TopicConfig:
    return JobConfig.build({"cleanup.policy": "compact", **values}).defaults


def plan(segments: list[ScannedSegment], config: TopicConfig, **checkpoints: int) -> PartitionPlan:
    return plan_partition(TP, segments, Checkpoints(**checkpoints), config, NOW)


def actions(p: PartitionPlan) -> list[list[int]]:
    assert p.compaction is not None
    return [a.tolist() for g in p.compaction.groups for a in g.actions]


def three_segments() -> list[ScannedSegment]:
    return [
        segment(0, 0, data(0), data(1, 9)),
        segment(1, 10, data(10, 19)),
        segment(2, 20, data(20, 29)),
    ]


def test_a_delete_policy_partition_is_not_compacted() -> None:
    p = plan(three_segments(), JobConfig.build({"retention.ms": -1}).defaults)
    assert p.compaction is None and p.copied == [0, 1, 2] and p.log_end_offset == 30


def test_the_active_segment_is_never_cleaned_unless_the_archive_is_sealed() -> None:
    # The last segment is the active one: the pass ends at its base and it is copied as it is.
    p = plan(three_segments(), compact())
    assert p.compaction is not None
    assert (p.compaction.first_dirty, p.compaction.first_uncleanable) == (0, 20)
    assert p.copied == [2] and [g.segment_ids for g in p.compaction.groups] == [(0, 1)]
    # segpipe.last.segment.sealed: the archive has no active segment, so the pass reaches the log end.
    p = plan(three_segments(), compact(**{"segpipe.last.segment.sealed": True}))
    assert p.compaction is not None and p.compaction.first_uncleanable == 30 and p.copied == []


def test_the_first_dirty_offset_comes_from_the_cleaner_checkpoint() -> None:
    p = plan(three_segments(), compact(), cleaner=10)
    assert p.compaction is not None and p.compaction.first_dirty == 10
    # The already-clean prefix is recopied too: the group still starts at the first segment.
    assert p.compaction.groups[0].base_offset == 0


@pytest.mark.parametrize("checkpoint", [31, -5])
def test_a_cleaner_checkpoint_outside_the_log_restarts_at_the_log_start(checkpoint: int) -> None:
    p = plan(three_segments(), compact(), cleaner=checkpoint, log_start=5)
    assert p.compaction is not None and p.compaction.first_dirty == 5


def test_min_compaction_lag_stops_the_pass_at_the_first_recent_segment() -> None:
    segments = [
        segment(0, 0, data(0, 9, ts=NOW - 3 * DAY)),
        segment(1, 10, data(10, 19, ts=NOW - 10)),  # younger than the lag
        segment(2, 20, data(20, 29, ts=NOW - 3 * DAY)),
        segment(3, 30, data(30, 39)),
    ]
    p = plan(segments, compact(**{"min.compaction.lag.ms": DAY}))
    assert p.compaction is not None and p.compaction.first_uncleanable == 10
    assert p.copied == [1, 2, 3]


def test_an_open_transaction_bounds_the_pass_at_its_segment() -> None:
    # Producer 7's transaction starts at 15 (segment 1) and has no marker: the last stable offset
    # is 15, and the pass ends at the base of the segment holding it.
    segments = [
        segment(0, 0, data(0, 9)),
        segment(1, 10, data(10, 14), txn(15, 19, pid=7)),
        segment(2, 20, data(20, 29)),
        segment(3, 30, data(30, 39)),
    ]
    p = plan(segments, compact(**{"segpipe.last.segment.sealed": True}))
    assert p.compaction is not None and p.compaction.first_uncleanable == 10
    # The partition's line names the producer and where its transaction starts.
    assert p.held_by is not None and (p.held_by.producer_id, p.held_by.first_offset) == (7, 15)
    assert "producer id 7, first offset 15" in p.held_by.holds("cleaning")
    assert p.summary()["held_by_transaction"] == {"producer_id": 7, "first_offset": 15}
    # Where the active segment bounds the pass first, the transaction holds nothing back.
    assert plan(segments[:2], compact()).held_by is None


def test_nothing_is_cleanable_when_the_bound_falls_on_the_first_segment() -> None:
    segments = [segment(0, 0, data(0, 9, ts=NOW)), segment(1, 10, data(10, 19))]
    p = plan(segments, compact(**{"min.compaction.lag.ms": DAY}))
    assert p.compaction is None and p.copied == [0, 1]


def test_groups_stay_within_segment_bytes() -> None:
    segments = [segment(i, 10 * i, data(10 * i, 10 * i + 9), size=400) for i in range(5)]
    p = plan(segments, compact(**{"segment.bytes": 1000}))
    assert p.compaction is not None
    # 400 + 400 fits 1000, a third does not; the active segment (4) is not grouped.
    assert [g.segment_ids for g in p.compaction.groups] == [(0, 1), (2, 3)]
    assert [g.base_offset for g in p.compaction.groups] == [0, 20]


def test_groups_keep_offsets_within_a_32_bit_span_of_their_base() -> None:
    # A segment's last offset is estimated as the next segment's base − 1. Segment 1 then ends at
    # 2^31 − 1, exactly the largest span a group based at 0 may hold; segment 2 would end at
    # 2^31 + 4 and starts a group of its own.
    far = 2**31
    segments = [
        segment(0, 0, data(0, 9)),
        segment(1, 10, data(10, 19)),
        segment(2, far, data(far, far + 4)),
        segment(3, far + 5, data(far + 5)),
    ]
    p = plan(segments, compact())
    assert p.compaction is not None
    assert [g.segment_ids for g in p.compaction.groups] == [(0, 1), (2,)]


def test_aborted_data_batches_are_dropped_whole_and_their_abort_marker_indexed() -> None:
    # Producer 7 is long idle (an active producer's last batch would be kept as an empty header).
    old = NOW - 2 * DAY
    segments = [
        segment(0, 0, txn(0, 4, pid=7, ts=old), data(5, 9), marker(10, 7, ControlType.ABORT, ts=old)),
        segment(1, 11, data(11, 19)),
    ]
    p = plan(segments, compact(**{"segpipe.last.segment.sealed": True}))
    assert p.compaction is not None
    [group] = p.compaction.groups
    assert group.actions[0].tolist()[0] == DELETE and bool(group.discard_records[0][0])
    # The marker still has data in the recopied prefix: it is kept, not discardable, and its
    # transaction goes into the output's .txnindex (derived from the log: no input .txnindex).
    assert not group.discardable[0][2] and not group.discard_records[0][2]
    assert group.txn_entries == (AbortedTxn(7, 0, 10, 11),)
    # The key map reads the keyed data batches only: not the aborted batch, not the marker.
    assert [k.tolist() for k in group.key_batches] == [[1], [0]]


def test_an_input_txnindex_entry_is_carried_over_as_it_was() -> None:
    indexed = AbortedTxn(7, 0, 10, 5)
    old = NOW - 2 * DAY
    segments = [
        segment(
            0,
            0,
            txn(0, 4, pid=7, ts=old),
            data(5, 9),
            marker(10, 7, ControlType.ABORT, ts=old),
            aborted=(indexed,),
        ),
        segment(1, 11, data(11, 19)),
    ]
    p = plan(segments, compact(**{"segpipe.last.segment.sealed": True}))
    assert p.compaction is not None and p.compaction.groups[0].txn_entries == (indexed,)


def test_a_marker_whose_transaction_has_no_data_left_is_discardable() -> None:
    # A COMMIT with no data of its transaction in the prefix (an earlier pass removed it all).
    segments = [segment(0, 0, data(0, 4), marker(5, 7, ControlType.COMMIT, ts=NOW - 2 * DAY), data(6, 9))]
    p = plan(segments, compact(**{"segpipe.last.segment.sealed": True}))
    assert p.compaction is not None
    [group] = p.compaction.groups
    assert bool(group.discardable[0][1]) and not group.discard_records[0][1]  # no horizon yet: kept
    assert group.actions[0].tolist()[1] == DELETE_EMPTY


def test_a_discardable_marker_past_its_delete_horizon_is_dropped() -> None:
    segments = [
        segment(
            0, 0, data(0, 4), marker(5, 7, ControlType.COMMIT, ts=NOW - 2 * DAY, horizon=NOW - 1), data(6, 9)
        )
    ]
    p = plan(segments, compact(**{"segpipe.last.segment.sealed": True}))
    assert actions(p) == [[DELETE_EMPTY, DELETE, RETAIN_EMPTY]]
    # Before its horizon the same marker stays.
    segments = [
        segment(
            0, 0, data(0, 4), marker(5, 7, ControlType.COMMIT, ts=NOW - 2 * DAY, horizon=NOW + 1), data(6, 9)
        )
    ]
    p = plan(segments, compact(**{"segpipe.last.segment.sealed": True}))
    assert actions(p) == [[DELETE_EMPTY, DELETE_EMPTY, RETAIN_EMPTY]]


def test_the_last_batch_of_an_active_producer_is_retained_empty() -> None:
    # Producer 3 wrote recently: its last batch keeps its header even if no record survives.
    # Producer 4 has been idle longer than producer.id.expiration.ms: no protection.
    segments = [
        segment(0, 0, data(0, 4, pid=3, ts=NOW - 10), data(5, 9, pid=4, ts=NOW - 2 * DAY), data(10, 14)),
        segment(1, 15, data(15, 19)),
    ]
    p = plan(segments, compact())
    assert actions(p) == [[RETAIN_EMPTY, DELETE_EMPTY, RETAIN_EMPTY]]


def test_only_a_producer_the_loading_broker_holds_is_retained_empty() -> None:
    # Kafka's cleaner protects the producers its broker holds: loaded from the latest snapshot and
    # the batches after it. Producer 3 wrote recently but a snapshot that lacks it comes after its
    # last batch (or the log stopped cleanly with no snapshot at all): the broker never knew it.
    segments = [
        segment(0, 0, data(0, 4, pid=3, ts=NOW - 10), data(5, 9, pid=4, ts=NOW - 10), data(10, 14)),
        segment(1, 15, data(15, 19)),
    ]
    loaded = plan_partition(TP, segments, Checkpoints(), compact(), NOW, loaded={4})
    assert actions(loaded) == [[DELETE_EMPTY, RETAIN_EMPTY, RETAIN_EMPTY]]
    none = plan_partition(TP, segments, Checkpoints(), compact(), NOW, loaded=set())
    assert actions(none) == [[DELETE_EMPTY, DELETE_EMPTY, RETAIN_EMPTY]]  # the pass's last batch stays
    assert actions(plan(segments, compact())) == [[RETAIN_EMPTY, RETAIN_EMPTY, RETAIN_EMPTY]]


def test_the_batch_ending_at_the_upper_bound_is_retained_empty() -> None:
    # The pass ends at 20 (the active segment's base): the batch ending at 19 keeps its header,
    # so the cleaned range keeps its last offset.
    segments = [segment(0, 0, data(0, 9), data(10, 19)), segment(1, 20, data(20, 29))]
    p = plan(segments, compact())
    assert actions(p) == [[DELETE_EMPTY, RETAIN_EMPTY]]


def test_legacy_tombstones_are_kept_in_segments_modified_after_the_legacy_horizon() -> None:
    # Legacy horizon = mtime of the last segment wholly below the first dirty offset (segment 1,
    # which ends where the dirty section starts) − delete.retention.ms (1 day) = NOW − 3 days.
    # A segment keeps its legacy tombstones only if modified strictly after the horizon.
    segments = [
        segment(0, 0, data(0, 9, magic=1), mtime=NOW - 5 * DAY),
        segment(1, 10, data(10, 19, magic=1), mtime=NOW - 2 * DAY),
        segment(2, 20, data(20, 29, magic=1), mtime=NOW - 3 * DAY),
        segment(3, 30, data(30, 39)),
    ]
    p = plan(segments, compact(**{"segment.bytes": 100}), cleaner=20)
    assert p.compaction is not None
    assert [g.retain_legacy_deletes for g in p.compaction.groups] == [(False,), (True,), (False,)]


def _selection_log(horizon: int | None = None) -> list[ScannedSegment]:
    """Two clean segments of 1,000 bytes, a dirty one of 100 (a dirty ratio of 100 / 2,100), the
    active segment; the cleaner has cleaned up to offset 20."""
    return [
        segment(0, 0, data(0, 9, size=1000, horizon=horizon)),
        segment(1, 10, data(10, 19, size=1000)),
        segment(2, 20, data(20, 29, size=100)),
        segment(3, 30, data(30, 39)),
    ]


@pytest.mark.parametrize(
    ("values", "horizon", "chosen", "reason"),
    [
        ({}, None, False, "dirty ratio 0.048 ≤ min.cleanable.dirty.ratio 0.5"),
        (
            {"min.cleanable.dirty.ratio": "0.04"},
            None,
            True,
            "dirty ratio 0.048 > min.cleanable.dirty.ratio 0.04",
        ),
        (
            {"min.cleanable.dirty.ratio": "0.05"},
            None,
            False,
            "dirty ratio 0.048 ≤ min.cleanable.dirty.ratio 0.05",
        ),
        ({"max.compaction.lag.ms": 3_600_001}, None, False, "compaction not overdue"),
        ({"max.compaction.lag.ms": 3_599_999}, None, True, "max.compaction.lag.ms 3599999 passed"),
        ({}, NOW + 1, False, "no delete horizon passed"),
        ({}, NOW, True, f"delete horizon {NOW} passed"),
    ],
)
def test_kafka_selection_compacts_only_what_kafkas_cleaner_would_choose(
    values: dict[str, object], horizon: int | None, chosen: bool, reason: str
) -> None:
    p = plan_partition(
        TP, _selection_log(horizon), Checkpoints(cleaner=20), compact(**values), NOW, select_kafka=True
    )
    assert p.selection is not None and reason in p.selection
    assert (p.compaction is not None) is chosen
    if not chosen:
        assert p.copied == [0, 1, 2, 3]
    # Without the selection every cleanable range is cleaned.
    default = plan_partition(TP, _selection_log(horizon), Checkpoints(cleaner=20), compact(**values), NOW)
    assert default.compaction is not None and default.selection is None
