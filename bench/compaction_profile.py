"""Where a compaction's time goes, phase by phase, in one process and without Spark: the key map
(map side: keys read and bucketed; the items pickled as they travel between tasks; reduce side:
the latest offset per key), then the rewrite. The same functions the Spark tasks run, on one
core, so the figures add up to the work of the compact stage (divide by the cores for its wall
time) and show what the shuffle's pickling costs beside the work itself.

    .venv/bin/python bench/compaction_profile.py bench/data/keys-50000000
    .venv/bin/python bench/compaction_profile.py bench/data/set-4gb-8p --top 15   # with cProfile
"""

from __future__ import annotations

import argparse
import cProfile
import pickle
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines.config import JobConfig  # noqa: E402
from pipelines.jobs.clean import job  # noqa: E402
from pipelines.jobs.clean.keymap import map_keys, reduce_keys  # noqa: E402
from pipelines.jobs.clean.rewrite import RewriteContext, rewrite_groups  # noqa: E402
from pipelines.log.plan import plan_log  # noqa: E402
from pipelines.log.scanned import scan_log  # noqa: E402
from pipelines.runtime.session import LazySpark  # noqa: E402
from segment_io.storage import Location  # noqa: E402

NOW_MS = 1_800_000_000_000
CONFIG_SETS = ["cleanup.policy=compact", "segpipe.last.segment.sealed=true"]


def no_spark() -> Any:
    raise AssertionError("the profile runs without Spark")


def timed(name: str, work: Callable[[], Any], profile: int) -> Any:
    profiler = cProfile.Profile() if profile else None
    t0 = time.perf_counter()
    if profiler:
        profiler.enable()
    result = work()
    if profiler:
        profiler.disable()
    print(f"{name}: {time.perf_counter() - t0:.2f} s")
    if profiler:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(profile)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("src")
    parser.add_argument("--top", type=int, default=0, help="print cProfile's top N functions per phase")
    args = parser.parse_args()
    config = JobConfig.from_sources(None, CONFIG_SETS)
    spark = LazySpark(no_spark)
    scanned = timed("scan", lambda: scan_log(spark, args.src, lambda _: None, skip_corrupt=False), 0)
    plans = plan_log(scanned.listing, scanned.segments, config, NOW_MS, False)
    key_tasks = job._key_tasks(plans, scanned)
    bounds = job._group_bounds(plans)
    groups = {g.gid: g for p in plans if p.compaction is not None for g in p.compaction.groups}
    buckets, tables = job._bucket_count(key_tasks, 1)
    records = sum(t.records for t in key_tasks)
    print(
        f"{records:,} keyed records, {len(key_tasks)} key-map tasks, {buckets} buckets, {len(groups)} groups"
    )
    mapped = timed("key map, map side", lambda: list(map_keys(key_tasks, buckets, tables)), args.top)
    blobs = timed(
        "  items pickled", lambda: [pickle.dumps(i, protocol=pickle.HIGHEST_PROTOCOL) for _, i in mapped], 0
    )
    print(f"  {len(mapped):,} items, {sum(map(len, blobs)) / 2**20:,.0f} MiB")
    timed("  items unpickled", lambda: [pickle.loads(b) for b in blobs], 0)
    blobs.clear()

    def reduce_all() -> list[tuple[int, Any]]:
        by_bucket: dict[int, list[Any]] = {}
        for b, item in mapped:
            by_bucket.setdefault(b, []).append(item)
        out = []
        for b in range(buckets):
            announce = [g for g in groups if g % buckets == b]
            out += reduce_keys(((b, i) for i in by_bucket.get(b, [])), bounds, announce, tables=tables)
        return out

    reduced = timed("key map, reduce side", reduce_all, args.top)
    mapped.clear()
    staging = Path(tempfile.mkdtemp(prefix="segpipe-profile-"))
    try:
        configs = {plan.tp.dir_name: plan.config for plan in plans}
        ctx = RewriteContext(scanned.src, Location(str(staging)), scanned.files, NOW_MS, configs)
        timed("rewrite", lambda: list(rewrite_groups(reduced, groups, ctx)), args.top)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


if __name__ == "__main__":
    main()
