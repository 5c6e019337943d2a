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
    """The samples' small segments are packed into one task; at one byte a partition, each
    segment is a task of its own: the same rows either way."""
    df = spark.read.format("kafka-segments").load(str(sample_dir))
    expected = spark.createDataFrame(deep_scan(sample_dir))
    assert df.rdd.getNumPartitions() == 1
    assert_df_equality(df, expected, ignore_row_order=True, ignore_nullable=True)
    assert df.filter("is_control").count() > 0
    one_each = spark.read.format("kafka-segments").option("maxPartitionBytes", "1").load(str(sample_dir))
    segments = sum(len(p.segments) for p in list_log_dir(*open_storage(str(sample_dir))).partitions)
    assert one_each.rdd.getNumPartitions() == segments > 4
    assert_df_equality(one_each, expected, ignore_row_order=True, ignore_nullable=True)


def test_datasource_topic_option_and_sql(spark, sample_dir: Path) -> None:  # type: ignore[no-untyped-def]
    df = spark.read.format("kafka-segments").option("topic", "orders").load(str(sample_dir))
    df.createOrReplaceTempView("orders")
    counts = {
        r["partition"]: r["n"]
        for r in spark.sql("select partition, count(*) n from orders group by 1").collect()
    }
    table = deep_scan(sample_dir, "orders")
    assert counts == {p: sum(1 for x in table.column("partition").to_pylist() if x == p) for p in (0, 1)}


def test_a_flipped_byte_fails_the_read_naming_file_and_byte(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tests.helpers import v2_batch, write_log

    root = tmp_path / "logs"
    records = [(i, 1_700_000_000_000 + i, b"k%d" % i, b"value-%d" % i, []) for i in range(3)]
    write_log(root, "t-0", [[v2_batch(0, records), v2_batch(3, records)]])
    log = root / "t-0" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    at = data.rindex(b"value-1")
    data[at] = ord("V")  # one value byte of the second batch: its CRC no longer matches
    log.write_bytes(bytes(data))
    with pytest.raises(Exception, match=r"CRC mismatch: .*00000000000000000000\.log at byte (\d+)") as caught:
        spark.read.format("kafka-segments").load(str(root)).collect()
    assert "CrcMismatch" in str(caught.value)
    assert f"at byte {len(v2_batch(0, records))}:" in str(caught.value)  # the second batch starts there
    # verifyCrc=false reads the damaged bytes as they are.
    df = spark.read.format("kafka-segments").option("verifyCrc", "false").load(str(root))
    assert sorted(bytes(r["value"]) for r in df.collect()) == sorted(
        [b"value-0", b"value-1", b"value-2", b"value-0", b"Value-1", b"value-2"]
    )


def test_empty_logs_read_as_empty_and_unknown_topics_are_named(
    spark, sample_dir: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "empty").mkdir()
    assert spark.read.format("kafka-segments").load(str(tmp_path / "empty")).count() == 0
    with pytest.raises(
        Exception, match=r"no topic nosuch in .* \(topics there: clicks, legacy-users, orders\)"
    ):
        spark.read.format("kafka-segments").option("topic", "nosuch").load(str(sample_dir)).count()
    both = spark.read.format("kafka-segments").option("topic", "orders,clicks").load(str(sample_dir))
    assert {r["topic"] for r in both.select("topic").distinct().collect()} == {"orders", "clicks"}


def test_a_partitions_entry_that_names_no_partition_is_refused(spark, sample_dir: Path) -> None:  # type: ignore[no-untyped-def]
    """A typo in `partitions` is named with what exists, as `topic` is, not read as an empty log."""
    read = spark.read.format("kafka-segments")
    for typo in ("orders-7", "orders0"):
        with pytest.raises(Exception, match=rf"no partition {typo} in .* \(partitions there: clicks-0, "):
            read.option("partitions", f"orders-0,{typo}").load(str(sample_dir)).count()
    with pytest.raises(Exception, match="partition clicks-0 is not of the topic option's orders"):
        read.option("topic", "orders").option("partitions", "clicks-0").load(str(sample_dir)).count()
    chosen = read.option("partitions", "orders-1").load(str(sample_dir))
    assert {
        (r["topic"], r["partition"]) for r in chosen.select("topic", "partition").distinct().collect()
    } == {("orders", 1)}
