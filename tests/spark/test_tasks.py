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


def test_routes_follow_sparks_own_hash(spark) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    from pipelines.runtime.dataflow import SPARK_HASH_SEED, murmur3_int, routes

    values = [-(2**31), -7, -1, 0, 1, 42, 2**31 - 1, *range(100, 4000, 37)]
    frame = spark.createDataFrame([(v,) for v in values], "v int").select("v", F.hash("v").alias("h"))
    assert {r.v: r.h for r in frame.collect()} == {v: murmur3_int(v, SPARK_HASH_SEED) for v in values}
    for parts in (1, 2, 7, 64):
        assert [murmur3_int(v, SPARK_HASH_SEED) % parts for v in routes(parts)] == list(range(parts))


def test_every_part_gets_a_task_of_its_own_with_its_items_only(spark) -> None:  # type: ignore[no-untyped-def]
    from pipelines.runtime import dataflow

    made = dataflow.each(spark, [[1, 2, 3], [4, 5], []], lambda pack: ((x % 5, x) for x in pack))
    summed = dataflow.routed(made, 7, lambda part, items: [(part, (part, sorted(items)))])
    got = sorted(obj for _, obj in dataflow.collected(summed))
    # Parts 5 and 6 receive nothing, and still run (their task says so); part 0 holds 5 alone.
    assert got == [(0, [5]), (1, [1]), (2, [2]), (3, [3]), (4, [4]), (5, []), (6, [])]
