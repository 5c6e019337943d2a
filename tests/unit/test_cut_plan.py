"""Where a partition is cut (pipelines.log.truncation), one rule of Kafka's truncation per test, on
hand-built batch headers: whole batches only, later segments dropped, the floor segment kept
(perhaps empty), an offset below the log, at or past its end, and the transactions left open."""

from __future__ import annotations

import pytest

from pipelines.log.truncation import (
    OpenTransaction,
    cut_partition,
    kept_epochs,
    kept_txns,
    lowered,
    lowered_cleaner_offset,
)
from segment_io.format.constants import ControlType
from segment_io.index import AbortedTxn
from tests.scanned import data, marker, segment, txn

pytestmark = pytest.mark.unit

# Two segments: offsets 0..9 in batches [0-4], [5-9]; 10..19 in [10-14], [15-19].
SEGMENTS = [segment(0, 0, data(0, 4), data(5, 9)), segment(1, 10, data(10, 14), data(15, 19))]
BASES = [0, 10]
TABLES = [s.table for s in SEGMENTS]


def test_a_cut_at_a_batch_boundary_keeps_everything_below() -> None:
    cut = cut_partition(BASES, TABLES, 15, 20)
    assert (cut.end, cut.kept_batches, cut.empty_at) == (15, (2, 1), None)


def test_a_batch_that_straddles_the_offset_goes_whole() -> None:
    cut = cut_partition(BASES, TABLES, 12, 20)
    assert (cut.end, cut.kept_batches) == (10, (2, 0))  # the segment at 10 stays, empty


def test_segments_above_the_offset_are_dropped() -> None:
    cut = cut_partition(BASES, TABLES, 7, 20)
    assert (cut.end, cut.kept_batches) == (5, (1, None))


def test_an_offset_at_a_segment_base_keeps_that_segment_empty() -> None:
    cut = cut_partition(BASES, TABLES, 10, 20)
    assert (cut.end, cut.kept_batches) == (10, (2, 0))


def test_an_offset_below_the_first_segment_leaves_one_empty_segment_there() -> None:
    cut = cut_partition([100], [segment(0, 100, data(100, 109)).table], 50, 110)
    assert (cut.end, cut.kept_batches, cut.empty_at) == (50, (None,), 50)


@pytest.mark.parametrize("asked", [20, 25, None])
def test_an_offset_at_or_past_the_end_cuts_nothing(asked: int | None) -> None:
    cut = cut_partition(BASES, TABLES, asked, 20)
    assert (cut.end, cut.kept_batches, cut.empty_at) == (20, (2, 2), None)


def test_an_offset_in_a_gap_between_segments_keeps_the_lower_one_whole() -> None:
    gap = [segment(0, 0, data(0, 4)), segment(1, 10, data(10, 14))]
    cut = cut_partition([0, 10], [s.table for s in gap], 7, 15)
    assert (cut.end, cut.kept_batches) == (5, (1, None))


def test_transactions_whose_marker_is_cut_off_stay_open() -> None:
    seg = segment(
        0,
        0,
        txn(0, 2, pid=7, epoch=3),
        marker(3, 7, ControlType.COMMIT),  # closed below the cut
        txn(4, 5, pid=7, epoch=3),  # reopened: its marker is above the cut
        txn(6, 6, pid=8),
        data(7, 7),
        marker(8, 8, ControlType.ABORT),
    )
    assert cut_partition([0], [seg.table], 8, 9).open_transactions == (
        OpenTransaction(7, 3, 4),
        OpenTransaction(8, 0, 6),
    )
    assert cut_partition([0], [seg.table], 9, 9).open_transactions == (OpenTransaction(7, 3, 4),)


def test_side_files_follow_the_new_end() -> None:
    txns = [AbortedTxn(1, 0, 4, 0), AbortedTxn(2, 3, 9, 3)]
    assert kept_txns(txns, 9) == [AbortedTxn(1, 0, 4, 0)]  # a marker at 9 is cut off
    assert kept_epochs([(0, 0), (1, 5), (2, 9)], 9) == [(0, 0), (1, 5)]
    assert (lowered(12, 9), lowered(4, 9)) == (9, 4)


def test_the_cleaner_checkpoint_goes_down_to_the_new_active_segment_not_the_new_end() -> None:
    """Kafka's truncation lowers a compacted partition's cleaner checkpoint to the base offset of
    its new active segment (the one the cut falls in), only where it is above it."""
    cut = cut_partition(BASES, TABLES, 15, 20)  # new end 15, in the segment at 10
    assert lowered_cleaner_offset(14, BASES, cut) == 10 and lowered_cleaner_offset(8, BASES, cut) == 8
    cut = cut_partition(BASES, TABLES, 7, 20)  # in the segment at 0, the one at 10 dropped
    assert lowered_cleaner_offset(10, BASES, cut) == 0
    assert lowered_cleaner_offset(10, BASES, cut_partition(BASES, TABLES, None, 20)) == 10  # not cut
    empty = cut_partition([100], [segment(0, 100, data(100, 109)).table], 50, 110)
    assert lowered_cleaner_offset(105, [100], empty) == 50


def test_a_transaction_open_in_the_log_as_it_is_is_not_one_the_cut_left_open() -> None:
    seg = segment(
        0,
        0,
        txn(0, 1, pid=7, epoch=3),
        marker(2, 7, ControlType.COMMIT),  # closed above a cut at 2
        txn(3, 4, pid=9),  # never closed: open in the log as it is
    )
    cut = cut_partition([0], [seg.table], 2, 5)
    assert cut.open_transactions == (OpenTransaction(7, 3, 0),) and cut.already_open == ()
    past_the_end = cut_partition([0], [seg.table], 99, 5)
    assert past_the_end.open_transactions == past_the_end.already_open == (OpenTransaction(9, 0, 3),)
