"""`spark.read.format("kafka-segments")` equals the deep scan, row for row and type for type."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from chispa import assert_df_equality

from segment_io.layout import list_log_dir
from segment_io.segment.reader import SegmentReader
from segment_io.storage import open_storage

pytestmark = pytest.mark.spark


def deep_scan(root: Path, topic: str | None = None) -> pa.Table:
    storage, path = open_storage(str(root))
    batches = []
    for part in list_log_dir(storage, path).partitions:
        if topic and part.tp.topic != topic:
            continue
        for seg in part.segments:
            batches += list(
                SegmentReader(storage, seg.log.path, seg.base_offset).record_batches(
                    part.tp.topic, part.tp.partition
                )
            )
    return pa.Table.from_batches(batches)


def test_datasource_matches_deep_scan(spark, sample_dir: Path) -> None:  # type: ignore[no-untyped-def]
    df = spark.read.format("kafka-segments").load(str(sample_dir))
    expected = spark.createDataFrame(deep_scan(sample_dir))
    assert df.rdd.getNumPartitions() > 4  # one input partition per segment
    assert_df_equality(df, expected, ignore_row_order=True, ignore_nullable=True)
    assert df.filter("is_control").count() > 0


def test_datasource_topic_option_and_sql(spark, sample_dir: Path) -> None:  # type: ignore[no-untyped-def]
    df = spark.read.format("kafka-segments").option("topic", "orders").load(str(sample_dir))
    df.createOrReplaceTempView("orders")
    counts = {
        r["partition"]: r["n"]
        for r in spark.sql("select partition, count(*) n from orders group by 1").collect()
    }
    table = deep_scan(sample_dir, "orders")
    assert counts == {p: sum(1 for x in table.column("partition").to_pylist() if x == p) for p in (0, 1)}
