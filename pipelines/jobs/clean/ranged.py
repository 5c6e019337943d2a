"""A partition too large for one core compacted in ranges of its segments, one task per range,
all at once, each decoding its range once (docs/cleaning-rules.md#key-map).

A dirty record survives if no later record of the dirty section has its key; a clean-section
record, if no dirty record has its key. So the task of a range learns which of its records
survive from its own records and the dirty keys of the ranges after it: each task makes its
range's key pass (read backwards, the survivors kept decoded: record_cache.py), writes its
range's dirty keys to a file the flow's tasks share, and reads those of the later ranges (the
last range needs none). An output group is rewritten by the range that holds its last segment;
a range holding earlier segments of it hands that range what it learnt there (the survivors,
their tombstones, the null-key count, and its decoded survivors), through a file too. Only keys
and survivors cross between tasks, once; no record is decoded twice where the caches hold them.

The tasks of a partition wait on each other, so they must run at once: this path is taken only
where the flow guarantees that (the driver's own processes, `Flow.shared`), with at most as many
ranges as the flow has cores and a partition's ranges handed out one after the other, before any
other task. Every wait is on a range that never waits for the waiter: keys are shared before a
task waits for anything, and hand-offs go only to later ranges. Each task holds at most
ALONE_ROWS keyed records of its own and one later range's keys at a time, as a task compacting
alone does, and a group's rewriter the survivors handed to it."""

from __future__ import annotations

import math
import os
import pickle
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from pipelines.jobs.clean import alone
from pipelines.jobs.clean.keymap import GroupBounds, KeyTask, NullKeys, Tombstones, reduce_keys
from pipelines.jobs.clean.record_cache import CachedBlock, RecordCache
from pipelines.jobs.clean.rewrite import GroupStats, RewriteContext, rewrite_groups
from pipelines.log.keytable import KeyRows
from pipelines.log.plan import GroupPlan

# How often a task looks for what another range's task writes for it (its keys, a hand-off).
POLL_SECONDS = 0.01
_KEY_FIELDS = ("tp", "hash", "data", "starts", "lengths", "offset")


@dataclass(frozen=True)
class PartitionRange:
    """One range of a partition's key-map segments (consecutive), and the output groups its task
    rewrites: those whose last such segment lies in it."""

    tp: int
    index: int  # of the partition's ranges, in log order
    ranges: int
    tasks: tuple[KeyTask, ...]
    gids: tuple[int, ...]
    holders: dict[int, tuple[int, ...]]  # per group of the partition: the ranges with its segments
    shared: str  # the directory every range of the run reads and writes

    @property
    def size(self) -> int:
        return sum(t.files.size for t in self.tasks)


@dataclass(frozen=True)
class HandOff:
    """What a range learnt of a group another range rewrites: the key map's items for it (its
    survivors there, their tombstones, its null keys) and the decoded records it cached there."""

    items: list[tuple[int, np.ndarray | Tombstones | NullKeys]]
    cached: list[CachedBlock]


def partition_ranges(
    key_tasks: Sequence[KeyTask], gids: dict[int, list[int]], parallelism: int, shared: str
) -> dict[int, list[PartitionRange]]:
    """The partitions (by index in the run) compacted in ranges: more bytes than a core's share
    of the run, at least two segments that feed the key map, and no range with more than
    ALONE_ROWS keyed records (a task's budget, as for a partition compacted alone). Each gets as
    many ranges as its bytes take cores' shares (at most `parallelism`, at most one per segment),
    its segments cut where the bytes before them cross each range's share. A group is rewritten
    by the range of its last segment (one with none, by the range of the group before it)."""
    share = alone.core_share(key_tasks, parallelism)
    out = {}
    for tp, mine in alone.by_partition(key_tasks, gids).items():
        size = sum(t.files.size for t in mine)
        if not share or size <= share or len(mine) < 2:
            continue
        count = min(parallelism, len(mine), math.ceil(size / share))
        parts = [tuple(mine[lo:hi]) for lo, hi in _cuts([t.files.size for t in mine], count)]
        if any(sum(t.records for t in tasks) > alone.ALONE_ROWS for tasks in parts):
            continue
        holders: dict[int, list[int]] = {g: [] for g in gids[tp]}
        for i, tasks in enumerate(parts):
            for task in tasks:
                if i not in holders[task.gid]:
                    holders[task.gid].append(i)
        owner, last = {}, 0
        for g in gids[tp]:  # ascending
            last = holders[g][-1] if holders[g] else last
            owner[g] = last
        held = {g: tuple(h) for g, h in holders.items()}
        place = os.path.join(shared, f"ranges-{tp}")
        out[tp] = [
            PartitionRange(tp, i, count, tasks, tuple(g for g in gids[tp] if owner[g] == i), held, place)
            for i, tasks in enumerate(parts)
        ]
    return out


def _cuts(sizes: list[int], count: int) -> list[tuple[int, int]]:
    """Items of `sizes` bytes, in order, cut into `count` non-empty runs of about equal bytes."""
    total = sum(sizes)
    before = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    # A run opens at the first item whose bytes before it reach the run's share, kept so that
    # every run has an item.
    starts = [0]
    for r in range(1, count):
        at = int(np.searchsorted(before, total * r / count, side="left"))
        starts.append(min(max(at, starts[-1] + 1), len(sizes) - (count - r)))
    return list(zip(starts, [*starts[1:], len(sizes)], strict=True))


def compact_range(
    part: PartitionRange, groups: dict[int, GroupPlan], bounds: GroupBounds, ctx: RewriteContext
) -> Iterator[GroupStats]:
    """Executed on a worker, at the same time as the partition's other ranges: this range's key
    pass, its dirty keys shared, the later ranges' read, what it learnt of groups that later
    ranges rewrite handed to them, then the rewrite of its own groups with what earlier ranges
    handed to it."""
    cache = RecordCache()

    def later(winners: KeyRows) -> Iterator[KeyRows]:
        _share(part, winners)  # before waiting for anything: the module's docstring
        return _later_keys(part)

    learnt = list(reduce_keys(alone.key_blocks(part.tasks, cache), bounds, list(part.gids), later))
    mine = [(gid, item) for gid, item in learnt if gid in part.gids]
    for gid in sorted({t.gid for t in part.tasks} - set(part.gids)):  # a later range rewrites it
        paths = {t.files.log.path for t in part.tasks if t.gid == gid}
        found = [(g, i) for g, i in learnt if g == gid and i is not None]
        _hand_off(part, gid, HandOff(found, cache.give(paths)))
    for gid in part.gids:
        for source in part.holders[gid]:
            if source != part.index:
                handed = _handed(part, gid, source)
                mine += handed.items
                cache.adopt(handed.cached)
    yield from rewrite_groups(mine, groups, ctx, cache)


def _keys_file(index: int) -> str:
    return f"keys-{index}.npz"


def _hand_off_file(gid: int, source: int) -> str:
    return f"group-{gid}-from-{source}.pickle"


def _write(part: PartitionRange, name: str, write: Callable[[BinaryIO], object]) -> None:
    """A file for the partition's other ranges, written whole and then renamed into place (a task
    waiting for it never reads part of it)."""
    os.makedirs(part.shared, exist_ok=True)
    final = os.path.join(part.shared, name)
    partial = f"{final}.{os.getpid()}.partial"
    with open(partial, "wb") as out:
        write(out)
    os.replace(partial, final)


def _share(part: PartitionRange, rows: KeyRows) -> None:
    """This range's dirty keys, for the ranges before it."""
    if part.index > 0:
        arrays = {name: getattr(rows, name) for name in _KEY_FIELDS}
        _write(part, _keys_file(part.index), lambda out: np.savez(out, **arrays))


def _hand_off(part: PartitionRange, gid: int, handed: HandOff) -> None:
    """What this range learnt of group `gid`, for the range that rewrites it."""
    name = _hand_off_file(gid, part.index)
    _write(part, name, lambda out: pickle.dump(handed, out, protocol=pickle.HIGHEST_PROTOCOL))


def _handed(part: PartitionRange, gid: int, source: int) -> HandOff:
    """What range `source` learnt of group `gid`, which this range rewrites, once it is there."""
    path = os.path.join(part.shared, _hand_off_file(gid, source))
    _wait_for(path)
    with open(path, "rb") as src:
        handed: HandOff = pickle.load(src)
    return handed


def _wait_for(path: str) -> None:
    """Until another range's task has written `path` (they run at once: the module's docstring)."""
    while not os.path.exists(path):
        time.sleep(POLL_SECONDS)


def _later_keys(part: PartitionRange) -> Iterator[KeyRows]:
    """The dirty keys of every range after this one, one range at a time, each as soon as its
    task has shared them (they run at once: see the module's docstring)."""
    for index in range(part.index + 1, part.ranges):
        path = os.path.join(part.shared, _keys_file(index))
        _wait_for(path)
        with np.load(path) as arrays:
            yield KeyRows(*(arrays[name] for name in _KEY_FIELDS))
