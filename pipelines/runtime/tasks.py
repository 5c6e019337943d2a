"""How work items become Spark tasks: consecutive items packed by size (one rule for every job)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import pyarrow as pa

from pipelines.config.tuning import DRIVER_WORK, tuned
from pipelines.runtime import dataflow, progress
from pipelines.runtime.driver_threads import driver_threads, in_driver_threads
from pipelines.runtime.session import LazySpark, session_of
from pipelines.runtime.spark_handle import Spark

T = TypeVar("T")
R = TypeVar("R")

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


def spark_packs(spark: Spark, items: Sequence[T], sizes: list[int], tasks_per_core: int) -> list[list[T]]:
    """`items` in packs for Spark tasks: `tasks_per_core` per core of the session. The bytes count
    towards the stage under way (its progress line's MB)."""
    progress.add_bytes(sum(sizes))
    return _packed(items, sizes, LazySpark.of(spark).parallelism() * tasks_per_core)


def on_workers(spark: Spark, chosen: list[list[T]], work: Callable[[list[T]], Iterable[R]]) -> list[R]:
    """`work` over each pack as a task of its own, every result in pack order: in the driver's
    own processes where the master is local (`spark`: a LazySpark carrying them), else as Spark
    tasks. A local master's Spark workers would be processes of this machine too; the driver's
    own cost no JVM and no Python worker start (seconds, most of a small run)."""
    lazy = LazySpark.of(spark)
    if lazy.local is not None:
        done = lazy.local.map(lambda pack: list(work(pack)), chosen)
        return [r for results in done for r in results]
    indexed = list(enumerate(chosen))
    frame = dataflow.each(lazy.session(), indexed, lambda p: ((p[0], r) for r in work(p[1])))
    # One task's results are in its order; the packs are put back in theirs.
    return [r for _, r in sorted(dataflow.collected(frame), key=lambda pair: pair[0])]


# Work over files the driver reads at disk speed (`Storage.near`) runs in the driver's own threads
# up to this many bytes: Spark's Python workers cost seconds to start, which is most of a small or
# header-only run. Measured on the 4 GB bench set (2 cores, warm page cache): its scan took 0.74 s
# in one driver thread and 0.9 s as a stage of driver threads, against 3.1 s as Spark tasks; a
# retention-only run went from 10.9-11.6 s to 7.6-8.1 s whole process. Files on object storage
# are always read by workers (Spark's, or a local master's processes), never in the driver's threads.
DRIVER_BYTES = 8 * 10**9


# A compaction of near files runs in the driver's threads when its compacted partitions hold at
# most this many bytes (and each fits one task, clean.alone): Spark's start and its first job's
# (the JVM, the SQL engine, Python workers) cost about 5 s, most of a small run. Larger runs go to
# the driver's processes where the master is local (local_workers), else to Spark: measured on the
# 4 GB bench set, its compaction took 8.2 s in two driver threads (the interpreter's lock) against
# 5.8 s in two warm Spark workers, and a process pool costs about a second to start.
DRIVER_COMPACT_BYTES = 64 * 2**20


def driver_work() -> bool:
    """Whether work over near files may run in the driver, in its threads or its processes (the
    tuning setting driver.work, config/tuning.py)."""
    return bool(tuned(DRIVER_WORK) != "off")


def driver_threads_work() -> bool:
    """Whether work over near files may run in the driver's threads (driver.work "on")."""
    return bool(tuned(DRIVER_WORK) == "on")


def fits_driver_compaction(near: bool, size: int) -> bool:
    """Whether a compaction of `size` bytes of files runs in the driver (DRIVER_COMPACT_BYTES)."""
    return driver_threads_work() and near and size <= DRIVER_COMPACT_BYTES


def placement(near: bool, size: int, rewrites: bool, local_cores: int | None) -> tuple[bool, bool]:
    """Where a run over a log of `size` bytes will likely work, known before its scan: (Spark
    needed, the driver's processes likely). The one rule every job's command line follows: work
    stays in the driver's threads while the log is near, driver.work allows it and it is small
    (DRIVER_BYTES; DRIVER_COMPACT_BYTES where the run rewrites segments, as compaction and erasure
    do); past that it goes to the driver's processes where the master is local (`local_cores`),
    else to Spark. A wrong guess only costs time: Spark starts where a stage needs it."""
    if rewrites:
        heavy = not (near and fits_driver_compaction(near, size))
    else:
        heavy = not (near and driver_work() and size <= DRIVER_BYTES)
    local = local_cores is not None
    return heavy and not local, heavy and local


def run_packed(
    spark: Spark,
    items: Sequence[T],
    sizes: list[int],
    tasks_per_core: int,
    work: Callable[[list[T]], Iterable[R]],
    near: bool,
    driver_bytes: int = DRIVER_BYTES,
) -> list[R]:
    """`work` over packs of `items`, every result in item order: in the driver's threads where
    the files are near and the total is at most `driver_bytes` (DRIVER_BYTES for work that mostly
    reads; DRIVER_COMPACT_BYTES for work that decodes every record); else with a local master in
    the driver's own processes (runtime.local_workers); else as Spark tasks."""
    if not items:
        return []
    if driver_threads_work() and near and sum(sizes) <= driver_bytes:
        progress.add_bytes(sum(sizes))
        done = in_driver_threads(lambda pack: list(work(pack)), _packed(items, sizes, driver_threads() * 2))
        return [r for results in done for r in results]

    lazy = LazySpark.of(spark)
    return on_workers(lazy, spark_packs(lazy, items, sizes, tasks_per_core), work)


def _packed(items: Sequence[T], sizes: list[int], parts: int) -> list[list[T]]:
    return [[items[i] for i in pack] for pack in packs(sizes, parts)]


# Work that turns records into rows (one per record) runs in the driver's threads, its rows kept
# there as one Arrow table, only up to this many input bytes of near files: such rows live in the
# driver's memory. Measured on the bundled samples (0.6 MB, 2 cores): a validation's
# record and promise rows took 3.6 s as two Spark stages (Python workers starting) and well under
# a second in the driver.
DRIVER_ROW_BYTES = 64 * 2**20


def fits_driver(near: bool, size: int) -> bool:
    """Whether rows made of `size` bytes of files are made in the driver (DRIVER_ROW_BYTES)."""
    return driver_threads_work() and near and size <= DRIVER_ROW_BYTES


# Spark DDL type names of the flat schemas one_task_each makes, as Arrow types.
ARROW_TYPES = {
    "string": pa.string(),
    "int": pa.int32(),
    "long": pa.int64(),
    "bigint": pa.int64(),
    "binary": pa.binary(),
    "boolean": pa.bool_(),
    "double": pa.float64(),
}


def arrow_schema(ddl: str) -> pa.Schema:
    """The Arrow schema of a flat DDL ("name type, ..."), without a JVM."""
    fields = []
    for column in ddl.split(","):
        name, kind = column.split()
        fields.append(pa.field(name, ARROW_TYPES[kind.lower()]))
    return pa.schema(fields)


def one_task_each(
    spark: Spark,
    items: Sequence[T],
    produce: Any,
    ddl: str,
    sizes: list[int] | None = None,
    near: bool = False,
) -> Any:
    """The Arrow record batches `produce(item)` returns (an iterable) for each item, schema `ddl`:
    where the items' files are near and small (`sizes`, fits_driver), made in the driver's threads
    and returned as one pyarrow Table (no Spark at all); else a DataFrame, one Spark task per item
    (`spark`: a session or a LazySpark). Spark sizes such a frame by its input (a few rows): joins
    with it must not be left to broadcast it."""
    if sizes is not None and fits_driver(near, sum(sizes)):
        made = in_driver_threads(lambda item: list(produce(item)), items)
        batches = [b for done in made for b in done if b.num_rows]
        # No empty batch, one chunk: a DataFrame made of an Arrow table whose batches include an empty
        # one holds only the rows before it (pyspark 4.3; measured: 3 rows of 3 + 0 + 4).
        schema = arrow_schema(ddl)
        return pa.Table.from_batches(batches, schema).combine_chunks()

    def run(batches: Any) -> Any:
        for b in batches:
            for i in b.column("id").to_pylist():
                yield from produce(items[i])

    return session_of(spark).range(0, len(items), numPartitions=max(1, len(items))).mapInArrow(run, ddl)
