"""A partition too large for one core compacted in ranges of its output groups: which partitions
and where the cuts fall, and the same bytes and counts as the partition compacted in one task,
whatever the number of ranges."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from pipelines.config import JobConfig
from pipelines.jobs.clean import job
from pipelines.jobs.clean.alone import ALONE_ROWS, alone_partitions, compact_alone
from pipelines.jobs.clean.keymap import KeyTask
from pipelines.jobs.clean.ranged import compact_range, partition_ranges
from pipelines.jobs.clean.rewrite import GroupStats, RewriteContext
from pipelines.log.plan import plan_log
from pipelines.log.scanned import scan_log
from pipelines.runtime.session import LazySpark
from segment_io.generate import generate_log_dir
from segment_io.generate_spec import TopicSpec
from segment_io.layout import SegmentFiles
from segment_io.storage import Location, open_storage
from segment_io.storage.base import FileInfo
from tests.helpers import files_of

pytestmark = pytest.mark.unit

NOW = 1_800_000_000_000


def _task(tp: int, gid: int, size: int, records: int = 10) -> KeyTask:
    log = FileInfo(f"{tp}/{gid}.log", f"{gid}.log", size, 0, False)
    return KeyTask(tp, gid, "memory://", SegmentFiles(gid, log), np.zeros(0, np.int64), 0, records)


def test_which_partitions_are_compacted_in_ranges_and_where_they_are_cut() -> None:
    # On 4 cores, a core's share is 1,000 bytes of the 4,000.
    tasks = [
        *(_task(0, g, 500) for g in range(5)),  # 2,500 bytes in 5 groups: 3 ranges
        _task(1, 10, 1_200),  # more than a share, but one group: no ranges
        _task(2, 20, 100),
        _task(2, 21, 100),  # within a share: compacted alone
        _task(3, 30, 50),
        _task(3, 31, 50),
    ]
    gids = {0: [0, 1, 2, 3, 4], 1: [10], 2: [20, 21], 3: [30, 31]}
    ranged = partition_ranges(tasks, gids, 4, "/shared")
    assert sorted(ranged) == [0]
    ranges = ranged[0]
    assert [r.gids for r in ranges] == [(0, 1), (2, 3), (4,)]
    assert [r.index for r in ranges] == [0, 1, 2] and {r.ranges for r in ranges} == {3}
    assert [[t.gid for t in r.tasks] for r in ranges] == [[0, 1], [2, 3], [4]]
    assert len({r.shared for r in ranges}) == 1 and ranges[0].shared.startswith("/shared/")
    # No more ranges than cores or groups; a range over the records budget leaves the partition
    # to the bucketed path.
    assert [r.gids for r in partition_ranges(tasks, gids, 2, "/s")[0]] == [(0, 1, 2), (3, 4)]
    heavy = [_task(0, 0, 500, ALONE_ROWS + 1), *tasks[1:]]
    assert 0 not in partition_ranges(heavy, gids, 4, "/s")
    # One group of five segments: the last range rewrites it, the others hand it what they learn.
    one = [_task(0, 7, 500) for _ in range(5)] + [_task(1, 8, 100)]
    [ranges] = partition_ranges(one, {0: [7], 1: [8]}, 2, "/s").values()
    assert [len(r.tasks) for r in ranges] == [3, 2] and [r.gids for r in ranges] == [(), (7,)]
    assert ranges[0].holders == {7: (0, 1)}


@pytest.mark.parametrize("group_bytes", [98304, 2**30])
@pytest.mark.parametrize("clean_section", [False, True])
@pytest.mark.parametrize("count", [2, 3, 4])
def test_a_partition_compacted_in_ranges_is_the_same_bytes_as_in_one_task(
    tmp_path: Path, count: int, clean_section: bool, group_bytes: int
) -> None:
    """Ranges run at once (in threads here), against the partition compacted alone: the same
    files, the same counts per group. With output groups of 96 KiB of input (several, some across ranges)
    and of 1 GiB (one group, which the last range rewrites); with a clean section (its first
    40 % taken as cleaned before), whose records go only where a dirty record, maybe ranges
    later, has their key."""
    spec = TopicSpec(
        "t",
        records=6000,
        keys=400,
        key_skew=1.1,
        null_key_ratio=0.05,
        tombstone_ratio=0.1,
        transactional_ratio=0.2,
        codecs=("none", "lz4", "zstd", "snappy", "gzip"),
        segment_bytes=32 * 1024,
    )
    src = tmp_path / "src"
    generate_log_dir(open_storage(str(src))[0], str(src), [spec])
    config = JobConfig.from_sources(None, ["cleanup.policy=compact", f"segment.bytes={group_bytes}"])
    scanned = scan_log(LazySpark(_no_spark), str(src), lambda _: None, skip_corrupt=False)
    plans = plan_log(scanned.listing, scanned.segments, config, NOW, False)
    key_tasks = job._key_tasks(plans, scanned)
    if clean_section:
        first_dirty = int(0.4 * max(s.base_offset for s in scanned.listing.partitions[0].segments))
        key_tasks = [dataclasses.replace(t, first_dirty=first_dirty) for t in key_tasks]
    bounds = job._group_bounds(plans)
    groups = {g.gid: g for p in plans if p.compaction is not None for g in p.compaction.groups}
    gids = {tp: bounds.gids[tp].tolist() for tp in bounds.gids}
    configs = {plan.tp.dir_name: plan.config for plan in plans}

    def ctx(out: str) -> RewriteContext:
        return RewriteContext(scanned.src, Location(str(tmp_path / out)), scanned.files, NOW, configs)

    [whole] = alone_partitions(key_tasks, gids, 1).values()
    alone = sorted(compact_alone(whole, groups, bounds, ctx("alone")), key=lambda s: s.gid)
    [ranges] = partition_ranges(key_tasks, gids, count, str(tmp_path / "shared")).values()
    assert len(ranges) == count
    with ThreadPoolExecutor(count) as pool:  # at once, as the flow runs them
        done = pool.map(
            lambda part: list(compact_range(part, {g: groups[g] for g in part.gids}, bounds, ctx("ranged"))),
            ranges,
        )
        ranged = sorted((s for stats in done for s in stats), key=lambda s: s.gid)
    assert files_of(tmp_path / "ranged") == files_of(tmp_path / "alone")
    assert sum(name.endswith(".log") for name in files_of(tmp_path / "alone")) == len(groups)
    assert (len(groups) == 1) == (group_bytes == 2**30)
    assert [_counts(s) for s in ranged] == [_counts(s) for s in alone]
    assert sum(s.superseded for s in alone) > 0 and sum(s.null_keys for s in alone) > 0


def _counts(stats: GroupStats) -> tuple[object, ...]:
    return tuple(v for k, v in sorted(dataclasses.asdict(stats).items()) if k != "seconds")


def _no_spark() -> None:
    raise AssertionError("no Spark here")
