"""Spark Python Data Source `kafka-segments`: one row per record, in parallel over segments.

    spark.read.format("kafka-segments").load("/var/lib/kafka/data")   # or s3://..., memory://...

Options: `topic` (one topic, or several comma-separated; a name that matches no topic of the log
is an error naming the topics there), `verifyCrc` (default true: every batch read has its CRC
checked before its records are returned, and a mismatch fails the read naming file and byte, as
`inspect`, `dump` and `clean` do; false skips the check), `partitions` (only these partition
directories, `orders-0,orders-1`), `remote` (the log's remote tier, read with it as one log),
`kafkaTier` (the path is a Kafka broker's log directory, read with its topics' KIP-405 remote tier:
the option names the broker's tiered-storage settings, as `--kafka-tier` does; `bootstrapServers`
reads its remote log metadata from the live cluster, as `--bootstrap-server` does).
Columns are those of the one record schema (segment_io.segment.arrow.RECORD_SCHEMA). Consecutive
segments are packed into input partitions as Spark packs small files: option `maxPartitionBytes`
(default MAX_PARTITION_BYTES) bounds what one task reads. Each segment is read in Arrow batches,
so memory stays bounded by the chunk size. A log with no segment reads as an empty DataFrame.

Options `fromOffset`, `toOffset`, `fromTime`, `toTime` (inclusive; times in epoch ms or ISO-8601)
choose segments and, through their `.index` and `.timeindex`, the byte window of each that can hold
such records (segment_io.segment.ranges): only those windows are read, and every record read is
checked against the range. They are options, not pushed filters, on purpose: Spark 4.3 keeps the
read a Python source planned for one query's pushed filters on the DataFrame and reuses it for the
next query of that DataFrame (or temporary view) that pushes no filter, which then answers with the
earlier query's rows. An option belongs to the DataFrame, so every query of it reads the same rows;
Spark's own `where` on any column is always applied by Spark, after a read of the whole log.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from pipelines.clock import parse_time
from pipelines.runtime.worker_daemon import freeze_loaded, in_spark_worker
from segment_io.kafka_tier.url import KafkaTierSource
from segment_io.layout import PartitionListing, list_log_dir
from segment_io.remote.view import log_url
from segment_io.segment.arrow import RECORD_SCHEMA
from segment_io.segment.ranges import RecordRange, Window, segment_window
from segment_io.segment.reader import SegmentReader
from segment_io.storage import open_storage

NAME = "kafka-segments"
# The options that bound the records read (inclusive), with the RecordRange field each sets.
RANGE_OPTIONS = {
    "fromOffset": "from_offset",
    "toOffset": "to_offset",
    "fromTime": "from_time",
    "toTime": "to_time",
}
# Segments are packed into a read's input partitions as Spark's own file sources pack files, with
# their defaults (spark.sql.files.maxPartitionBytes and openCostInBytes): consecutive segments up
# to MAX_PARTITION_BYTES, each weighing OPEN_COST_BYTES more than its bytes. A task costs tens of
# milliseconds whatever it reads, so a log of many small segments reads in a few tasks; a segment
# of Kafka's default 1 GiB stays a task of its own. Option `maxPartitionBytes` sets the bound.
MAX_PARTITION_BYTES = 128 * 2**20
OPEN_COST_BYTES = 4 * 2**20


def spark_schema() -> Any:
    """The Spark form of the one record schema (segment_io.segment.arrow.RECORD_SCHEMA)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(RECORD_SCHEMA)


@dataclass(frozen=True)
class SegmentRead:
    """One segment file and the bytes of it a read needs (`window`)."""

    path: str
    base_offset: int
    topic: str
    partition: int
    window: Window

    @property
    def cost(self) -> int:
        """What reading it weighs when segments are packed: its bytes and the cost of an open."""
        return self.window.end - self.window.start + OPEN_COST_BYTES


class SegmentPartition(InputPartition):
    """Segments read one after the other by one task: the unit of parallelism of a read (no
    segment at all where the log holds none)."""

    def __init__(self, url: str, reads: tuple[SegmentRead, ...] = ()) -> None:
        super().__init__([r.path for r in reads])
        self.url = url
        self.reads = reads


def packed(reads: list[SegmentRead], max_bytes: int) -> list[tuple[SegmentRead, ...]]:
    """`reads` in their order, cut into runs of at most `max_bytes` of cost each (a segment that
    weighs more alone is a run of its own)."""
    runs: list[tuple[SegmentRead, ...]] = []
    run: list[SegmentRead] = []
    weight = 0
    for read in reads:
        if run and weight + read.cost > max_bytes:
            runs.append(tuple(run))
            run, weight = [], 0
        run.append(read)
        weight += read.cost
    return [*runs, tuple(run)] if run else runs


class KafkaSegmentsReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.url = options.get("path") or options.get("paths", "")
        if not self.url:
            raise ValueError("kafka-segments needs a path: spark.read.format('kafka-segments').load(PATH)")
        topics = options.get("topic")
        self.topics = {t.strip() for t in topics.split(",") if t.strip()} if topics else None
        self.verify_crc = _flag(options, "verifyCrc", True)
        # `partitions`: only these partition directories (`orders-0,orders-1`), e.g. the sound ones.
        chosen = options.get("partitions")
        self.partition_dirs = {p.strip() for p in chosen.split(",") if p.strip()} if chosen else None

        # `remote`: the log's remote tier, read with it as one log (a remote tier alone is a path too).
        # `kafkaTier`, `bootstrapServers`: a broker's log directory read with its Kafka remote tier;
        # `fromBucket`: its remote segments found in the storage itself (the metadata topic lost).
        settings = options.get("kafkaTier", options.get("kafkatier"))  # Spark lower-cases option names
        bootstrap = options.get("bootstrapServers", options.get("bootstrapservers"))
        from_bucket = _flag(options, "fromBucket", False)
        tier = None if settings is None else KafkaTierSource(settings, bootstrap, from_bucket=from_bucket)
        self.url = log_url(self.url, options.get("remote"), tier)
        # Set once from the options, never by a query: the read is the same for every query of the
        # DataFrame (see the module's docstring).
        self.want = range_option(options)
        self.max_partition_bytes = _bytes(options, "maxPartitionBytes", MAX_PARTITION_BYTES)

    def partitions(self) -> list[SegmentPartition]:

        storage, path = open_storage(self.url)
        listing = list_log_dir(storage, path)
        present = {p.tp.topic for p in listing.partitions}
        if self.topics is not None and not self.topics <= present:
            missing, there = ", ".join(sorted(self.topics - present)), ", ".join(sorted(present)) or "none"
            raise ValueError(f"kafka-segments: no topic {missing} in {self.url} (topics there: {there})")
        chosen = [
            part
            for part in listing.partitions
            if (self.topics is None or part.tp.topic in self.topics)
            and (self.partition_dirs is None or part.tp.dir_name in self.partition_dirs)
        ]
        if self.partition_dirs is not None:
            self._require_partitions(listing.partitions, chosen)
        segments = [
            (part, files, part.segments[i + 1].base_offset if i + 1 < len(part.segments) else None)
            for part in chosen
            for i, files in enumerate(part.segments)
        ]
        reads = []
        if not self.want.empty:
            windows = _windows(storage, segments, self.want)
            notes = [w.note for w in windows if w is not None and w.note]
            if notes:  # one line per read: the rows are right either way, only slower
                print(
                    f"segpipe: warning: {len(notes)} segment(s) read whole, their indexes unusable "
                    f"({notes[0]})",
                    file=sys.stderr,
                )
            reads = [
                SegmentRead(files.log.path, files.base_offset, part.tp.topic, part.tp.partition, w)
                for (part, files, _), w in zip(segments, windows, strict=True)
                if w is not None
            ]
        # Spark needs at least one input partition; an empty one reads nothing.
        return [SegmentPartition(self.url, run) for run in packed(reads, self.max_partition_bytes)] or [
            SegmentPartition(self.url)
        ]

    def _require_partitions(
        self, present: Sequence[PartitionListing], chosen: Sequence[PartitionListing]
    ) -> None:
        """Refuse a `partitions` entry that names no partition directory of the log, or one of a
        topic the `topic` option leaves out (a typo would otherwise read as an empty log)."""
        assert self.partition_dirs is not None
        names = {p.tp.dir_name for p in present}
        absent = sorted(self.partition_dirs - names)
        if absent:
            shown = sorted(names)
            there = ", ".join(shown[:20]) + (f", ... ({len(shown)} in all)" if len(shown) > 20 else "")
            raise ValueError(
                f"kafka-segments: no partition {', '.join(absent)} in {self.url} "
                f"(partitions there: {there or 'none'})"
            )
        left_out = sorted(self.partition_dirs - {p.tp.dir_name for p in chosen})
        if left_out:
            raise ValueError(
                f"kafka-segments: partition {', '.join(left_out)} is not of the topic option's "
                f"{', '.join(sorted(self.topics or ()))}"
            )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:

        assert isinstance(partition, SegmentPartition)
        if not partition.reads:
            return
        storage, _ = open_storage(partition.url)
        want = None if self.want.unbounded else self.want
        for read in partition.reads:
            reader = SegmentReader(storage, read.path, read.base_offset, read.window)
            if self.verify_crc:
                reader.verify_crcs()
            yield from reader.record_batches(read.topic, read.partition, want=want)


def range_option(options: dict[str, str]) -> RecordRange:
    """The offset and time range the options bound (inclusive); a bad value or an empty range is
    refused naming the option."""

    bounds: dict[str, int] = {}
    for name, field in RANGE_OPTIONS.items():
        value = options.get(name, options.get(name.lower()))
        if value is None:
            continue
        if "Time" in name:
            bounds[field] = parse_time(value, f"kafka-segments: option {name}")
        elif value.strip().lstrip("-").isdigit():
            bounds[field] = int(value)
        else:
            raise ValueError(f"kafka-segments: option {name}={value!r} must be an offset (an integer)")
    want = RecordRange(**bounds)
    if want.empty:
        raise ValueError(f"kafka-segments: the range {bounds} holds nothing (a lower bound above its upper)")
    return want


def _windows(
    storage: Any, segments: list[tuple[Any, Any, int | None]], want: RecordRange
) -> list[Window | None]:
    """Each segment's window for `want`, its indexes read a few at a time (object stores)."""

    if want.unbounded:
        return [Window(0, files.size, files.size) for _, files, _ in segments]
    with ThreadPoolExecutor(max_workers=16) as pool:
        return list(pool.map(lambda s: segment_window(storage, s[1], s[2], want), segments))


def _bytes(options: dict[str, str], name: str, default: int) -> int:
    value = options.get(name, options.get(name.lower()))
    if value is None:
        return default
    if not value.strip().isdigit() or int(value) <= 0:
        raise ValueError(f"kafka-segments: option {name}={value!r} must be a number of bytes above 0")
    return int(value)


def _flag(options: dict[str, str], name: str, default: bool) -> bool:
    value = options.get(name, options.get(name.lower()))
    if value is None:
        return default
    if value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"kafka-segments: option {name}={value!r} must be true or false")


class KafkaSegmentsDataSource(DataSource):
    """Options: see the module's docstring."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> Any:
        return spark_schema()

    def reader(self, schema: Any) -> KafkaSegmentsReader:
        del schema
        options = dict(self.options)
        if _flag(options, "pushdown", False):
            raise ValueError(
                "kafka-segments: option pushdown=true is no longer taken: Spark 4.3 reuses a read "
                "planned for one query's filters in the next query of the same DataFrame, which "
                "then answers wrongly; bound the read with the options fromOffset, toOffset, "
                "fromTime and toTime instead"
            )
        return KafkaSegmentsReader(options)


def register(spark: Any) -> None:
    """Register the source on `spark`."""
    spark.dataSource.register(KafkaSegmentsDataSource)


# The planner's calls (schema, partitions) are served by PySpark's own daemon, which preloads
# nothing: the worker that imports this module freezes what it then holds (runtime.worker_daemon).
if in_spark_worker():
    freeze_loaded()
