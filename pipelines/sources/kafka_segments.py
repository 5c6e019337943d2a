"""Spark Python Data Source `kafka-segments`: one row per record, in parallel over segments.

    spark.read.format("kafka-segments").load("/var/lib/kafka/data")   # or s3://..., memory://...

Options: `topic` (one topic, or several comma-separated; a name that matches no topic of the log
is an error naming the topics there), `verifyCrc` (default true: every batch's CRC is checked
before its records are returned, and a mismatch fails the read naming file and byte, as
`inspect`, `dump` and `clean` do; false skips the check). Columns are those of the one record
schema (segment_io.segment.arrow.RECORD_SCHEMA); each segment is one input partition and is read
in Arrow batches, so memory stays bounded by the chunk size. A log with no segment reads as an
empty DataFrame.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

NAME = "kafka-segments"


def spark_schema() -> Any:
    """The Spark form of the one record schema (segment_io.segment.arrow.RECORD_SCHEMA)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from segment_io.segment.arrow import RECORD_SCHEMA

    return from_arrow_schema(RECORD_SCHEMA)


class SegmentPartition(InputPartition):
    """One segment file: the unit of parallelism of a read (`path` None: no segment at all)."""

    def __init__(self, url: str, path: str | None, base_offset: int, topic: str, partition: int) -> None:
        super().__init__(path)
        self.url = url
        self.path = path
        self.base_offset = base_offset
        self.topic = topic
        self.partition = partition


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

    def partitions(self) -> list[SegmentPartition]:
        from segment_io.layout import list_log_dir
        from segment_io.storage import open_storage

        storage, path = open_storage(self.url)
        listing = list_log_dir(storage, path)
        present = {p.tp.topic for p in listing.partitions}
        if self.topics is not None and not self.topics <= present:
            missing, there = ", ".join(sorted(self.topics - present)), ", ".join(sorted(present)) or "none"
            raise ValueError(f"kafka-segments: no topic {missing} in {self.url} (topics there: {there})")
        out = [
            SegmentPartition(self.url, seg.log.path, seg.base_offset, part.tp.topic, part.tp.partition)
            for part in listing.partitions
            if (self.topics is None or part.tp.topic in self.topics)
            and (self.partition_dirs is None or part.tp.dir_name in self.partition_dirs)
            for seg in part.segments
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
        reader = SegmentReader(storage, partition.path, partition.base_offset)
        if self.verify_crc:
            reader.verify_crcs()
        yield from reader.record_batches(partition.topic, partition.partition)


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
        return KafkaSegmentsReader(dict(self.options))


def register(spark: Any) -> None:
    spark.dataSource.register(KafkaSegmentsDataSource)
