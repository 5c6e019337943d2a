"""Spark Python Data Source `kafka-segments`: one row per record, in parallel over segments.

    spark.read.format("kafka-segments").load("/var/lib/kafka/data")   # or s3://..., memory://...

Columns are those of the one record schema (segment_io.segment.arrow.RECORD_SCHEMA); each segment is one
input partition and is read in Arrow batches, so memory stays bounded by the chunk size.
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
    """One segment file: the unit of parallelism of a read."""

    def __init__(self, url: str, path: str, base_offset: int, topic: str, partition: int) -> None:
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
        self.topic = options.get("topic")

    def partitions(self) -> list[SegmentPartition]:
        from segment_io.layout import list_log_dir
        from segment_io.storage import open_storage

        storage, path = open_storage(self.url)
        out = []
        for part in list_log_dir(storage, path).partitions:
            if self.topic and part.tp.topic != self.topic:
                continue
            for seg in part.segments:
                out.append(
                    SegmentPartition(
                        self.url, seg.log.path, seg.base_offset, part.tp.topic, part.tp.partition
                    )
                )
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from segment_io.segment.reader import SegmentReader
        from segment_io.storage import open_storage

        assert isinstance(partition, SegmentPartition)

        storage, _ = open_storage(partition.url)
        reader = SegmentReader(storage, partition.path, partition.base_offset)
        yield from reader.record_batches(partition.topic, partition.partition)


class KafkaSegmentsDataSource(DataSource):
    """Options: `path` (the log directory), optional `topic` to read one topic only."""

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
