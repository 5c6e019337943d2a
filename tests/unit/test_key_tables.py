"""The key map's buckets split over several key tables (keymap.map_keys): the same survivors per
output group, tombstones and null-key counts as one table a bucket, with a clean section whose
records go only where the dirty section has their key."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from pipelines.config import JobConfig
from pipelines.jobs.clean import job
from pipelines.jobs.clean.keymap import GroupBounds, KeyTask, NullKeys, Tombstones, map_keys, reduce_keys
from pipelines.log.plan import plan_log
from pipelines.log.scanned import scan_log
from pipelines.runtime.session import LazySpark
from segment_io.generate import generate_log_dir
from segment_io.generate_spec import TopicSpec
from segment_io.storage import open_storage

pytestmark = pytest.mark.unit

NOW = 1_800_000_000_000


def _no_spark() -> None:
    raise AssertionError("no Spark here")


def _survivors(
    tasks: list[KeyTask], bounds: GroupBounds, buckets: int, tables: int
) -> dict[object, list[int]]:
    """Two map tasks, then each bucket's reduce: per group, its surviving offsets (relative), its
    surviving tombstones and its null-key count."""
    half = len(tasks) // 2
    by_bucket: dict[int, list[tuple[int, object]]] = defaultdict(list)
    for pack in (tasks[:half], tasks[half:]):
        for bucket, item in map_keys(pack, buckets, tables):
            by_bucket[bucket].append((bucket, item))
    out: dict[object, list[int]] = defaultdict(list)
    for bucket in range(buckets):
        for gid, item in reduce_keys(by_bucket[bucket], bounds, [], tables=tables):  # type: ignore[arg-type]
            if isinstance(item, np.ndarray):
                out[("kept", gid)] += item.tolist()
            elif isinstance(item, Tombstones):
                out[("tombstones", gid)] += item.relative.tolist()
            elif isinstance(item, NullKeys):
                out[("null", gid)].append(item.count)
    return {k: sorted(v) for k, v in out.items()}


@pytest.mark.parametrize("tables", [2, 7])
def test_a_bucket_over_several_key_tables_keeps_what_one_table_keeps(tmp_path: Path, tables: int) -> None:
    spec = TopicSpec(
        "t",
        partitions=2,
        records=4000,
        keys=300,
        key_skew=1.1,
        null_key_ratio=0.05,
        tombstone_ratio=0.1,
        transactional_ratio=0.2,
        codecs=("none", "lz4"),
        segment_bytes=16 * 1024,
    )
    src = tmp_path / "src"
    generate_log_dir(open_storage(str(src))[0], str(src), [spec])
    config = JobConfig.from_sources(None, ["cleanup.policy=compact", "segment.bytes=65536"])
    scanned = scan_log(LazySpark(_no_spark), str(src), lambda _: None, skip_corrupt=False)
    plans = plan_log(scanned.listing, scanned.segments, config, NOW, False)
    # The first 40 % of each partition taken as cleaned before: a clean section.
    tasks = []
    for task in job._key_tasks(plans, scanned):
        last = max(s.base_offset for s in scanned.listing.partitions[task.tp].segments)
        tasks.append(dataclasses.replace(task, first_dirty=int(0.4 * last)))
    bounds = job._group_bounds(plans)

    one = _survivors(tasks, bounds, buckets=3, tables=1)
    assert _survivors(tasks, bounds, buckets=3, tables=tables) == one
    assert _survivors(tasks, bounds, buckets=1, tables=1) == one
    kept = sum(len(v) for k, v in one.items() if k[0] == "kept")  # type: ignore[index]
    assert 0 < kept < 2 * 300 and any(k[0] == "tombstones" for k in one)  # type: ignore[index]
