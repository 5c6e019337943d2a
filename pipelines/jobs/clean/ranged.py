"""A partition too large for one core compacted in ranges of its output groups, one task per
range, all at once, each decoding its range once (docs/cleaning-rules.md#key-map).

A dirty record survives if no later record of the dirty section has its key; a clean-section
record, if no dirty record has its key. So the task of a range learns all it needs from its own
records and the dirty keys of the ranges after it: each task makes its range's key pass (read
backwards, the survivors kept decoded: record_cache.py), writes its range's dirty keys to a file
the flow's tasks share, reads those of the later ranges (the last range needs none), and rewrites
its groups from its cache. Only keys cross between tasks, once; no record is decoded twice.

The tasks of a partition wait on each other, so they must run at once: this path is taken only
where the flow guarantees that (the driver's own processes, `Flow.shared`), with at most as many
ranges as the flow has cores and a partition's ranges handed out one after the other, before any
other task. Each task holds at most ALONE_ROWS keyed records of its own and one later range's keys
at a time, as a task compacting alone does."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from pipelines.jobs.clean import alone
from pipelines.jobs.clean.keymap import (
    GroupBounds,
    KeyTask,
    NullKeys,
    Tombstones,
    extract_keys,
    group_winners,
)
from pipelines.jobs.clean.record_cache import RecordCache
from pipelines.jobs.clean.rewrite import GroupStats, RewriteContext, rewrite_groups
from pipelines.log.keytable import EMPTY, KeyRows, LatestOffsets
from pipelines.log.plan import GroupPlan

# How often a task looks for a later range's keys while that range's key pass runs.
POLL_SECONDS = 0.01
_KEY_FIELDS = ("tp", "hash", "data", "starts", "lengths", "offset")


@dataclass(frozen=True)
class PartitionRange:
    """One range of a partition's output groups (consecutive), and its key-map inputs."""

    tp: int
    index: int  # of the partition's ranges, in log order
    ranges: int
    tasks: tuple[KeyTask, ...]
    gids: tuple[int, ...]
    shared: str  # the directory every range of the run reads and writes

    @property
    def size(self) -> int:
        return sum(t.files.size for t in self.tasks)


def partition_ranges(
    key_tasks: Sequence[KeyTask], gids: dict[int, list[int]], parallelism: int, shared: str
) -> dict[int, list[PartitionRange]]:
    """The partitions (by index in the run) compacted in ranges: more bytes than a core's share
    of the run, at least two output groups, and no range with more than ALONE_ROWS keyed records
    (a task's budget, as for a partition compacted alone). Each gets as many ranges as its bytes
    take cores' shares (at most `parallelism`, at most one per group), its groups cut where the
    bytes before them cross each range's share."""
    share = alone.core_share(key_tasks, parallelism)
    out = {}
    for tp, mine in alone.by_partition(key_tasks, gids).items():
        size = sum(t.files.size for t in mine)
        if not share or size <= share or len(gids[tp]) < 2:
            continue
        count = min(parallelism, len(gids[tp]), math.ceil(size / share))
        cuts = _cuts(gids[tp], mine, count)
        parts = []
        for lo, hi in cuts:
            chosen = set(gids[tp][lo:hi])
            tasks = tuple(t for t in mine if t.gid in chosen)
            parts.append((tasks, tuple(gids[tp][lo:hi])))
        if all(sum(t.records for t in tasks) <= alone.ALONE_ROWS for tasks, _ in parts):
            place = os.path.join(shared, f"ranges-{tp}")
            out[tp] = [PartitionRange(tp, i, len(parts), t, g, place) for i, (t, g) in enumerate(parts)]
    return out


def _cuts(gids: list[int], tasks: list[KeyTask], count: int) -> list[tuple[int, int]]:
    """`gids` (ascending) cut into `count` non-empty runs of about equal bytes."""
    sizes = np.array([sum(t.files.size for t in tasks if t.gid == g) for g in gids], dtype=np.int64)
    total = int(sizes.sum())
    before = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    # Group k opens range floor(bytes before it / range's share), kept within 0..count-1 and so
    # that every range has a group.
    starts = [0]
    for r in range(1, count):
        at = int(np.searchsorted(before, total * r / count, side="left"))
        starts.append(min(max(at, starts[-1] + 1), len(gids) - (count - r)))
    return list(zip(starts, [*starts[1:], len(gids)], strict=True))


def compact_range(
    part: PartitionRange, groups: dict[int, GroupPlan], bounds: GroupBounds, ctx: RewriteContext
) -> Iterator[GroupStats]:
    """Executed on a worker, at the same time as the partition's other ranges: this range's key
    pass, its dirty keys shared, the later ranges' read, then the rewrite of its groups."""
    null_keys: dict[int, int] = {}
    cache = RecordCache()
    dirty = LatestOffsets()
    clean: list[KeyRows] = []
    for rows, clean_rows in extract_keys(list(part.tasks), null_keys, cache=cache):
        dirty.add(rows)
        if len(clean_rows):
            clean.append(clean_rows)
    winners = dirty.rows()
    _share(part, winners)
    superseded = np.zeros(len(dirty), dtype=np.bool_)
    clean_rows = KeyRows.concat(clean)
    clean_keys = LatestOffsets()
    clean_entry = clean_keys.add(clean_rows)
    clean_gone = dirty.contains(clean_rows)  # a clean record goes if any dirty record has its key
    later_gone = np.zeros(len(clean_keys), dtype=np.bool_)
    for later in _later_keys(part):
        for table, marks in ((dirty, superseded), (clean_keys, later_gone)):
            entries = table.entries(later)
            marks[entries[entries != EMPTY]] = True
    clean_gone |= later_gone[clean_entry]
    tps = np.concatenate([winners.tp[~superseded], clean_rows.tp[~clean_gone]])
    tagged = np.concatenate([winners.offset[~superseded], clean_rows.offset[~clean_gone]])

    def items() -> Iterator[tuple[int, np.ndarray | Tombstones | NullKeys | None]]:
        for gid in part.gids:
            yield gid, None
        for gid, count in sorted(null_keys.items()):
            yield gid, NullKeys(gid, count)
        yield from group_winners(tps, tagged, bounds)

    yield from rewrite_groups(items(), groups, ctx, cache)


def _path(part: PartitionRange, index: int) -> str:
    return os.path.join(part.shared, f"{index}.npz")


def _share(part: PartitionRange, rows: KeyRows) -> None:
    """This range's dirty keys, for the ranges before it (written whole, then renamed)."""
    if part.index == 0:
        return
    os.makedirs(part.shared, exist_ok=True)
    final = _path(part, part.index)
    partial = f"{final}.{os.getpid()}.partial"
    with open(partial, "wb") as out:
        np.savez(out, **{name: getattr(rows, name) for name in _KEY_FIELDS})
    os.replace(partial, final)


def _later_keys(part: PartitionRange) -> Iterator[KeyRows]:
    """The dirty keys of every range after this one, one range at a time, each as soon as its
    task has shared them (they run at once: see the module's docstring)."""
    for index in range(part.index + 1, part.ranges):
        path = _path(part, index)
        while not os.path.exists(path):
            time.sleep(POLL_SECONDS)
        with np.load(path) as arrays:
            yield KeyRows(*(arrays[name] for name in _KEY_FIELDS))
