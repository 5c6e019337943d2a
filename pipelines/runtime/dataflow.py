"""Python work as DataFrame operations, the same on classic Spark and on Spark Connect (which has
no RDDs): a task's results travel as pickled items in a binary column beside the part they are
for; `routed` hands every part to a task of its own, as a hash partitioner keyed by part would;
`collected` brings items back to the driver.

A frame of items has the columns `part int, item binary`; a null item only says its part exists.
"""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

import pyarrow as pa

from pipelines.runtime.local_flow import LocalFlow
from pipelines.runtime.session import LazySpark
from pipelines.runtime.spark_handle import Spark

P = TypeVar("P")

ITEMS = "part int, item binary"
ITEMS_ARROW = pa.schema([pa.field("part", pa.int32()), pa.field("item", pa.binary())])
# A task's items leave it in Arrow batches of about this many bytes (or FLUSH_ITEMS items).
FLUSH_BYTES = 8 * 2**20
FLUSH_ITEMS = 1024
# Spark's hash partitioning: Murmur3 (x86, 32 bits) of the column's value, seed 42, modulo the
# partition count (never negative).
SPARK_HASH_SEED = 42


def _batches(pairs: Iterable[tuple[int, Any]]) -> Iterator[pa.RecordBatch]:
    """(part, object) pairs as Arrow batches of pickled items, a few MB each."""
    parts: list[int] = []
    items: list[bytes | None] = []
    size = 0
    for part, obj in pairs:
        data = None if obj is None else pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        parts.append(part)
        items.append(data)
        size += len(data or b"")
        if size >= FLUSH_BYTES or len(items) >= FLUSH_ITEMS:
            yield pa.RecordBatch.from_arrays(
                [pa.array(parts, pa.int32()), pa.array(items, pa.binary())], schema=ITEMS_ARROW
            )
            parts, items, size = [], [], 0
    if items:
        yield pa.RecordBatch.from_arrays(
            [pa.array(parts, pa.int32()), pa.array(items, pa.binary())], schema=ITEMS_ARROW
        )


def _pairs(batches: Iterable[pa.RecordBatch]) -> Iterator[tuple[int, Any]]:
    """The (part, object) pairs of batches of items; an announcement's object is None."""
    for batch in batches:
        parts = batch.column("part").to_pylist()
        items = batch.column("item")
        for i, part in enumerate(parts):
            data = items[i].as_py()
            yield part, None if data is None else pickle.loads(data)


def each(spark: Any, packs: Sequence[P], work: Callable[[P], Iterable[tuple[int, Any]]]) -> Any:
    """A frame of the items `work(pack)` yields as (part, object), one Spark task per pack, in
    pack order (`spark`: a SparkSession)."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for i in b.column("id").to_pylist():
                yield from _batches(work(packs[i]))

    return spark.range(0, len(packs), numPartitions=max(1, len(packs))).mapInArrow(run, ITEMS)


def routes(parts: int) -> list[int]:
    """For each part p < `parts`, a value Spark's hash partitioning into `parts` partitions sends
    to partition p: routed by it, every part has a task of its own."""
    out: dict[int, int] = {}
    value = 0
    while len(out) < parts:
        out.setdefault(murmur3_int(value, SPARK_HASH_SEED) % parts, value)
        value += 1
    return [out[p] for p in range(parts)]


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF


def _mix_k1(k1: int) -> int:
    return (_rotl((k1 * 0xCC9E2D51) & 0xFFFFFFFF, 15) * 0x1B873593) & 0xFFFFFFFF


def _mix_h1(h1: int, k1: int) -> int:
    return (_rotl(h1 ^ k1, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF


def _fmix(h1: int, length: int) -> int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & 0xFFFFFFFF
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & 0xFFFFFFFF
    return h1 ^ (h1 >> 16)


def murmur3_int(value: int, seed: int) -> int:
    """Murmur3 x86-32 of one 32-bit int, as Spark's `hash()` of an int column (signed)."""
    h = _fmix(_mix_h1(seed & 0xFFFFFFFF, _mix_k1(value & 0xFFFFFFFF)), 4)
    return h - (1 << 32) if h >= 1 << 31 else h


def routed(frame: Any, parts: int, work: Callable[[int, Iterator[Any]], Iterable[tuple[int, Any]]]) -> Any:
    """A frame of the items `work(part, objects)` yields, called once for every part < `parts`
    in a task of its own with the objects `frame` holds for that part (none: an empty iterator).
    The objects arrive as they were made, in no set order."""
    from pyspark.sql import functions as F

    spark = frame.sparkSession
    # Every part gets a null item, so that its task runs even when no object is for it.
    announce = spark.range(0, parts, numPartitions=1).select(
        F.col("id").cast("int").alias("part"), F.lit(None).cast("binary").alias("item")
    )
    route = F.array(*[F.lit(v) for v in routes(parts)])[F.col("part")]

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pairs = _pairs(b.select(["part", "item"]) for b in batches)
        first = next(pairs, None)
        if first is None:
            return
        part = first[0]

        def objects() -> Iterator[Any]:
            for p, obj in itertools.chain([first], pairs):
                if p != part:
                    raise AssertionError(f"items of part {p} reached the task of part {part}")
                if obj is not None:
                    yield obj

        yield from _batches(work(part, objects()))

    return (
        frame.unionByName(announce)
        .withColumn("route", route.cast("int"))
        .repartition(parts, "route")
        .drop("route")
        .mapInArrow(run, ITEMS)
    )


def collected(frame: Any) -> list[tuple[int, Any]]:
    """Every (part, object) of a frame of items, in the driver (a null item is left out)."""
    return [(part, obj) for part, obj in _pairs(frame.toArrow().to_batches()) if obj is not None]


class Flow(Protocol):
    """A job's flow of pickled items between tasks: SparkFlow, or LocalFlow (the driver's own
    processes). A frame is whatever the flow makes; only the flow reads it.

    `shared`: a directory every task of the flow reads and writes, where the flow also runs the
    first packs of an `each` at once (as many as it has cores); None where it cannot promise
    that (Spark: tasks on other machines, started as slots free up)."""

    shared: str | None

    def each(self, packs: Sequence[Any], work: Callable[[Any], Iterable[tuple[int, Any]]]) -> Any: ...

    def routed(
        self, frame: Any, parts: int, work: Callable[[int, Iterator[Any]], Iterable[tuple[int, Any]]]
    ) -> Any: ...

    def union(self, frames: Sequence[Any]) -> Any: ...

    def collected(self, frame: Any) -> list[tuple[int, Any]]: ...


class SparkFlow:
    """The operations above over one session, as the object a job's flow is written against
    (runtime.local_flow.LocalFlow runs the same flow in the driver's own processes)."""

    def __init__(self, spark: Spark) -> None:
        self.spark = spark
        self.shared: str | None = None

    def each(self, packs: Sequence[P], work: Callable[[P], Iterable[tuple[int, Any]]]) -> Any:
        return each(self.spark, packs, work)

    def routed(
        self, frame: Any, parts: int, work: Callable[[int, Iterator[Any]], Iterable[tuple[int, Any]]]
    ) -> Any:
        return routed(frame, parts, work)

    def union(self, frames: Sequence[Any]) -> Any:
        out = frames[0]
        for frame in frames[1:]:
            out = out.unionByName(frame)
        return out

    def collected(self, frame: Any) -> list[tuple[int, Any]]:
        return collected(frame)


@contextmanager
def flow_of(spark: Spark) -> Iterator[tuple[Flow, int]]:
    """A run's flow and how many of its tasks run at once: the driver's own processes where the
    master is local (`spark`: a LazySpark carrying them), else Spark (started here)."""
    lazy = LazySpark.of(spark)
    if lazy.local is not None:
        with LocalFlow(lazy.local) as flow:
            yield flow, lazy.local.cores
    else:
        yield SparkFlow(lazy.session()), lazy.parallelism()
