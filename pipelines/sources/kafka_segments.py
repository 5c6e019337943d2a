"""Spark Python Data Source `kafka-segments`: one row per record, in parallel over segments.

    spark.read.format("kafka-segments").load("/var/lib/kafka/data")   # or s3://..., memory://...

Options: `topic` (one topic, or several comma-separated; a name that matches no topic of the log
is an error naming the topics there), `verifyCrc` (default true: every batch read has its CRC
checked before its records are returned, and a mismatch fails the read naming file and byte, as
`inspect`, `dump` and `clean` do; false skips the check), `pushdown` (default true; see below).
Columns are those of the one record schema (segment_io.segment.arrow.RECORD_SCHEMA); each segment
is one input partition and is read in Arrow batches, so memory stays bounded by the chunk size. A
log with no segment reads as an empty DataFrame.

Filters on `topic` and `partition` (=, IN) choose partition directories; filters on `offset` and
`timestamp` (=, <, <=, >, >=, BETWEEN, AND-ed) choose segments and, through their `.index` and
`.timeindex`, the byte window of each that can hold such records (segment_io.segment.ranges):
only those windows are read, and every record read is checked against the range, so the rows are
the rows Spark's own filter would keep. Spark hands filters to a Python source only with
`spark.sql.python.filterPushdown.enabled` (segpipe's sessions and `register` turn it on; a
session without it refuses the source, naming the setting, unless the option `pushdown` is false).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
)

from segment_io.segment.ranges import RecordRange, Window

NAME = "kafka-segments"
# The setting without which Spark hands a Python source no filter (and refuses one that takes them).
PUSHDOWN_SETTING = "spark.sql.python.filterPushdown.enabled"
# Columns every record has a value in: a filter that they are not null holds for every row.
NEVER_NULL = {("topic",), ("partition",), ("offset",), ("timestamp",)}


def spark_schema() -> Any:
    """The Spark form of the one record schema (segment_io.segment.arrow.RECORD_SCHEMA)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from segment_io.segment.arrow import RECORD_SCHEMA

    return from_arrow_schema(RECORD_SCHEMA)


class SegmentPartition(InputPartition):
    """One segment file: the unit of parallelism of a read (`path` None: no segment at all)."""

    def __init__(
        self,
        url: str,
        path: str | None,
        base_offset: int,
        topic: str,
        partition: int,
        window: Window | None = None,
    ) -> None:
        super().__init__(path)
        self.url = url
        self.path = path
        self.base_offset = base_offset
        self.topic = topic
        self.partition = partition
        self.window = window  # the bytes that can hold the range asked for (None: all)


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
        from segment_io.remote.view import log_url

        # `remote`: the log's remote tier, read with it as one log (a remote tier alone is a path too).
        self.url = log_url(self.url, options.get("remote"))
        self.want = RecordRange()  # the offset and time range the pushed filters ask for
        self.topic_filter: set[str] | None = None  # from pushed filters; None: no such filter
        self.partition_filter: set[int] | None = None

    def partitions(self) -> list[SegmentPartition]:
        from segment_io.layout import list_log_dir
        from segment_io.storage import open_storage

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
            and (self.topic_filter is None or part.tp.topic in self.topic_filter)
            and (self.partition_filter is None or part.tp.partition in self.partition_filter)
        ]
        segments = [
            (part, files, part.segments[i + 1].base_offset if i + 1 < len(part.segments) else None)
            for part in chosen
            for i, files in enumerate(part.segments)
        ]
        out = []
        if not self.want.empty:
            windows = _windows(storage, segments, self.want)
            notes = [w.note for w in windows if w is not None and w.note]
            if notes:  # one line per read: the rows are right either way, only slower
                print(
                    f"segpipe: warning: {len(notes)} segment(s) read whole, their indexes unusable "
                    f"({notes[0]})",
                    file=sys.stderr,
                )
            out = [
                SegmentPartition(
                    self.url, files.log.path, files.base_offset, part.tp.topic, part.tp.partition, w
                )
                for (part, files, _), w in zip(segments, windows, strict=True)
                if w is not None
            ]
        # Spark needs at least one input partition; this one reads nothing.
        return out or [SegmentPartition(self.url, None, 0, "", 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from segment_io.segment.reader import SegmentReader
        from segment_io.storage import open_storage

        assert isinstance(partition, SegmentPartition)
        if partition.path is None:
            return
        storage, _ = open_storage(partition.url)
        reader = SegmentReader(storage, partition.path, partition.base_offset, partition.window)
        if self.verify_crc:
            reader.verify_crcs()
        want = None if self.want.unbounded else self.want
        yield from reader.record_batches(partition.topic, partition.partition, want=want)


class PushdownReader(KafkaSegmentsReader):
    """The reader that takes Spark's filters on topic, partition, offset and timestamp."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        for condition in filters:
            if not self._take(condition):
                yield condition

    def _take(self, condition: Filter) -> bool:
        """Whether `condition` is applied in full here (else Spark applies it after the read)."""
        column = condition.attribute if hasattr(condition, "attribute") else ()
        if isinstance(condition, IsNotNull) and column in NEVER_NULL:
            return True
        values: tuple[Any, ...]
        if isinstance(condition, EqualTo | EqualNullSafe):
            values = (condition.value,)
        elif isinstance(condition, In):
            values = tuple(condition.value)
        else:
            values = ()
        if column == ("topic",) and values and all(isinstance(v, str) for v in values):
            chosen = set(values)
            self.topic_filter = chosen if self.topic_filter is None else self.topic_filter & chosen
            return True
        if column == ("partition",) and values and all(_is_int(v) for v in values):
            numbers = set(values)
            self.partition_filter = (
                numbers if self.partition_filter is None else self.partition_filter & numbers
            )
            return True
        if column not in (("offset",), ("timestamp",)):
            return False
        bound = _bound(condition)
        if bound is None:
            return False
        low, high = bound
        narrowed = (
            RecordRange(from_offset=low, to_offset=high)
            if column == ("offset",)
            else RecordRange(from_time=low, to_time=high)
        )
        self.want = self.want.narrowed(narrowed)
        # IN narrows the range to its smallest and largest value; Spark still picks the values.
        return not isinstance(condition, In)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _bound(condition: Filter) -> tuple[int | None, int | None] | None:
    """The inclusive bounds an integer comparison states, None for any other condition."""
    if isinstance(condition, In):
        values = tuple(condition.value)
        if not values or not all(_is_int(v) for v in values):
            return None
        return min(values), max(values)
    value = getattr(condition, "value", None)
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    if isinstance(condition, EqualTo | EqualNullSafe):
        return value, value
    if isinstance(condition, GreaterThan):
        return value + 1, None
    if isinstance(condition, GreaterThanOrEqual):
        return value, None
    if isinstance(condition, LessThan):
        return None, value - 1
    if isinstance(condition, LessThanOrEqual):
        return None, value
    return None


def _windows(
    storage: Any, segments: list[tuple[Any, Any, int | None]], want: RecordRange
) -> list[Window | None]:
    """Each segment's window for `want`, its indexes read a few at a time (object stores)."""
    from segment_io.segment.ranges import segment_window

    if want.unbounded:
        return [Window(0, files.size, files.size) for _, files, _ in segments]
    with ThreadPoolExecutor(max_workers=16) as pool:
        return list(pool.map(lambda s: segment_window(storage, s[1], s[2], want), segments))


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
        if _flag(options, "pushdown", True):
            return PushdownReader(options)
        return KafkaSegmentsReader(options)


def register(spark: Any) -> None:
    """Register the source on `spark`, with the setting that lets Spark push filters to it."""
    spark.conf.set(PUSHDOWN_SETTING, "true")
    spark.dataSource.register(KafkaSegmentsDataSource)
