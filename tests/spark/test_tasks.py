"""Rows produced per item arrive whole, in the driver's threads (a Table, and the DataFrame Spark
makes of it for a frame too large for the driver's engine) and on the workers alike, also where
an item produces an empty batch between others (a DataFrame made of an Arrow table keeps only the
rows before its first empty batch)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pipelines.runtime import tasks

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("near", [True, False])
def test_every_row_of_every_item_arrives(spark, near: bool) -> None:  # type: ignore[no-untyped-def]
    def produce(n: int) -> list[pa.RecordBatch]:  # defined here: the workers unpickle it by value
        batch = pa.RecordBatch.from_arrays([pa.array(list(range(n)), pa.int64())], names=["x"])
        return [batch, batch.slice(0, 0), batch]

    expected = sorted([*range(3), *range(3), *range(4), *range(4)])
    frame = tasks.one_task_each(spark, [3, 0, 4], produce, "x long", sizes=[10, 10, 10], near=near)
    if near:
        assert isinstance(frame, pa.Table) and frame.schema == pa.schema([("x", pa.int64())])
        assert sorted(frame.column("x").to_pylist()) == expected
        frame = spark.createDataFrame(frame)
    assert sorted(r.x for r in frame.collect()) == expected


def test_an_item_list_with_no_rows_is_an_empty_table_of_the_schema() -> None:
    def produce(n: int) -> list[pa.RecordBatch]:
        return []

    frame = tasks.one_task_each(
        None, [1, 2], produce, "topic string, partition int, ok boolean", [1, 1], True
    )
    assert frame.num_rows == 0
    assert frame.schema == pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("ok", pa.bool_())])
