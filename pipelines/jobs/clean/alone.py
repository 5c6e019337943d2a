"""A partition compacted inside one task: the key map's map and reduce sides and the rewrite of
its groups run one after the other in one Python worker, with nothing shuffled. Kafka's rules
are those of the bucketed path (the same functions, fed in one place); only partitions whose
keyed records fit a task's budget (ALONE_ROWS) and whose bytes are no more than a core's share of
the run take this path, so memory stays bounded and every core stays busy."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pipelines.jobs.clean.keymap import GroupBounds, KeyBlock, KeyTask, NullKeys, extract_keys, reduce_keys
from pipelines.jobs.clean.record_cache import RecordCache
from pipelines.jobs.clean.rewrite import GroupStats, RewriteContext, rewrite_groups
from pipelines.log.plan import GroupPlan

# A partition with at most this many keyed records in its cleanable range is compacted in one
# task: the reduce side holds its dirty keys and its clean section's keyed records (tens of
# bytes each plus the keys), a few hundred MB at most.
ALONE_ROWS = 4_000_000


@dataclass(frozen=True)
class AlonePartition:
    """One partition's key-map inputs and the ids of all its output groups."""

    tasks: tuple[KeyTask, ...]
    gids: tuple[int, ...]

    @property
    def size(self) -> int:
        return sum(t.files.size for t in self.tasks)


def by_partition(key_tasks: Sequence[KeyTask], gids: dict[int, list[int]]) -> dict[int, list[KeyTask]]:
    """Each compacted partition's key-map inputs, in log order (none where it has no keyed records)."""
    tasks: dict[int, list[KeyTask]] = {tp: [] for tp in gids}
    for task in key_tasks:
        tasks[task.tp].append(task)
    return tasks


def core_share(key_tasks: Sequence[KeyTask], parallelism: int) -> float:
    """A core's share of the bytes the run's key map reads."""
    return sum(t.files.size for t in key_tasks) / max(1, parallelism)


def alone_partitions(
    key_tasks: Sequence[KeyTask], gids: dict[int, list[int]], parallelism: int
) -> dict[int, AlonePartition]:
    """The partitions (by index in the run; `gids`: each compacted partition's groups) that are
    compacted alone: at most ALONE_ROWS keyed records, and no more bytes than a core's share of
    the run (a larger one is spread over every core by the bucketed path)."""
    share = core_share(key_tasks, parallelism)
    out = {}
    for tp, mine in by_partition(key_tasks, gids).items():
        part = AlonePartition(tuple(mine), tuple(gids[tp]))
        if sum(t.records for t in mine) <= ALONE_ROWS and part.size <= share:
            out[tp] = part
    return out


def compact_alone(
    part: AlonePartition, groups: dict[int, GroupPlan], bounds: GroupBounds, ctx: RewriteContext
) -> Iterator[GroupStats]:
    """Executed on a worker: the key map of one partition, then the rewrite of each of its groups.
    The reduce side reads the map side's blocks as they are made; the records the key pass saw
    as the latest of their keys stay decoded for the rewrite (record_cache.py)."""
    cache = RecordCache()
    reduced = reduce_keys(key_blocks(part.tasks, cache), bounds, list(part.gids))
    yield from rewrite_groups(reduced, groups, ctx, cache)


def key_blocks(tasks: Sequence[KeyTask], cache: RecordCache) -> Iterator[tuple[int, KeyBlock | NullKeys]]:
    """The key pass of one task's segments as the reduce side takes it, in one task: the keyed
    rows in blocks, then the null-key counts; the survivors kept decoded in `cache`."""
    null_keys: dict[int, int] = {}
    for dirty, clean in extract_keys(list(tasks), null_keys, cache=cache):
        if len(dirty):
            yield 0, KeyBlock(dirty, dirty=True)
        if len(clean):
            yield 0, KeyBlock(clean, dirty=False)
    for gid, count in sorted(null_keys.items()):
        yield 0, NullKeys(gid, count)
