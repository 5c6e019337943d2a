"""How the `kafka-segments` source packs segments into input partitions (a rule per test), and
the option that bounds them, planned without Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.sources.kafka_segments import (
    MAX_PARTITION_BYTES,
    OPEN_COST_BYTES,
    KafkaSegmentsReader,
    SegmentRead,
    packed,
)
from segment_io.layout import list_log_dir
from segment_io.segment.ranges import Window
from segment_io.storage import open_storage

MB = 2**20


def read(name: str, size: int, start: int = 0) -> SegmentRead:
    return SegmentRead(name, 0, "t", 0, Window(start, size, size))


def names(runs: list[tuple[SegmentRead, ...]]) -> list[list[str]]:
    return [[r.path for r in run] for run in runs]


def test_a_segment_weighs_its_bytes_read_and_the_cost_of_an_open() -> None:
    assert read("a", 10 * MB).cost == 10 * MB + OPEN_COST_BYTES
    assert read("a", 10 * MB, start=4 * MB).cost == 6 * MB + OPEN_COST_BYTES  # a range's window


def test_consecutive_segments_share_a_run_up_to_the_bound() -> None:
    reads = [read(n, 60 * MB) for n in "abc"]  # 64 MB each with the open
    assert names(packed(reads, 128 * MB)) == [["a", "b"], ["c"]]


def test_a_segment_above_the_bound_is_a_run_of_its_own() -> None:
    reads = [read("small", MB), read("big", 1024 * MB), read("small2", MB)]
    assert names(packed(reads, 128 * MB)) == [["small"], ["big"], ["small2"]]


def test_the_order_is_kept_and_nothing_is_left_out() -> None:
    reads = [read(str(i), (i % 7) * MB) for i in range(40)]
    runs = packed(reads, 32 * MB)
    assert [r for run in runs for r in run] == reads
    assert all(sum(r.cost for r in run) <= 32 * MB for run in runs if len(run) > 1)


def test_no_segment_no_run() -> None:
    assert packed([], MAX_PARTITION_BYTES) == []


def test_the_samples_plan_as_one_partition_and_one_byte_plans_one_per_segment(
    sample_dir: Path, tmp_path: Path
) -> None:
    segments = sum(len(p.segments) for p in list_log_dir(*open_storage(str(sample_dir))).partitions)
    whole = KafkaSegmentsReader({"path": str(sample_dir)}).partitions()
    each = KafkaSegmentsReader({"path": str(sample_dir), "maxPartitionBytes": "1"}).partitions()
    assert len(whole) == 1 and len(whole[0].reads) == segments > 4
    assert [p.reads for p in each] == [(r,) for r in whole[0].reads]
    assert [p.reads for p in KafkaSegmentsReader({"path": str(tmp_path)}).partitions()] == [()]  # no segment


@pytest.mark.parametrize("value", ["0", "-1", "1MB", ""])
def test_a_bad_bound_is_refused_naming_the_option(sample_dir: Path, value: str) -> None:
    with pytest.raises(ValueError, match=f"option maxPartitionBytes={value!r} must be a number of bytes"):
        KafkaSegmentsReader({"path": str(sample_dir), "maxPartitionBytes": value})
