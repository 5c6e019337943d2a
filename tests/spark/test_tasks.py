"""Rows produced per item reach the DataFrame whole, in the driver's threads and on the workers
alike, also where an item produces an empty batch between others (a DataFrame made of an Arrow
table keeps only the rows before its first empty batch)."""

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

    frame = tasks.one_task_each(spark, [3, 0, 4], produce, "x long", sizes=[10, 10, 10], near=near)
    assert sorted(r.x for r in frame.collect()) == sorted([*range(3), *range(3), *range(4), *range(4)])
