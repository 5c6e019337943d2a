"""How work items become Spark tasks: consecutive items packed by size (one rule for every job)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from pipelines.runtime import progress

T = TypeVar("T")

# A pack averages at most this many bytes, whatever the parallelism.
MOST_BYTES_PER_TASK = 1 << 30


def packs(sizes: list[int], parts: int, most: int = MOST_BYTES_PER_TASK) -> list[list[int]]:
    """Consecutive items cut into about `parts` packs of similar total size, and at least enough
    packs that they average no more than `most`: a Python task costs tens of milliseconds before
    it does any work, so a task takes several items, in order (a task then mostly sees one
    partition's segments)."""
    total = sum(sizes)
    parts = max(1, parts, -(-total // most))
    out: list[list[int]] = []
    done = 0
    for i, size in enumerate(sizes):
        # A pack ends where the running total crosses its share of the whole.
        if not out or (len(out) < parts and out[-1] and done * parts >= len(out) * total > 0):
            out.append([])
        out[-1].append(i)
        done += size
    return out


def packed(sc: Any, items: Sequence[T], sizes: list[int], tasks_per_core: int) -> Any:
    """An RDD with one element per pack of `items` (a list), one Spark partition per pack. The
    bytes count towards the stage under way (its progress line's MB)."""
    progress.add_bytes(sum(sizes))
    chosen = packs(sizes, sc.defaultParallelism * tasks_per_core)
    return sc.parallelize([[items[i] for i in pack] for pack in chosen], max(1, len(chosen)))


def one_task_each(spark: Any, items: Sequence[T], produce: Any, ddl: str) -> Any:
    """A DataFrame (schema `ddl`) of the Arrow record batches `produce(item)` returns (an iterable)
    for each item, one Spark task per item, computed on the workers. Spark sizes such a frame by
    its input (a few rows): joins with it must not be left to broadcast it."""

    def run(batches: Any) -> Any:
        for b in batches:
            for i in b.column("id").to_pylist():
                yield from produce(items[i])

    return spark.range(0, len(items), numPartitions=max(1, len(items))).mapInArrow(run, ddl)
