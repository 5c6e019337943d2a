"""Filters pushed to the `kafka-segments` source: for random offset and time ranges (with topic
and partition filters), the rows read with pushdown equal the rows Spark's own filter keeps
without it, for every codec, CreateTime out of order and LogAppendTime, across segments, with a
segment's indexes missing; the plan keeps no filter of its own for what was pushed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from segment_io.generate import TopicSpec, generate_log_dir
from segment_io.storage import open_storage

pytestmark = pytest.mark.spark

SPECS = [
    TopicSpec("created", partitions=2, records=1500, segment_bytes=32 * 1024, span_ms=3_600_000),
    TopicSpec("appended", records=1000, log_append_time=True, segment_bytes=32 * 1024, span_ms=3_600_000),
]
START, SPAN = 1_700_000_000_000, 3_600_000  # the generator's default start; the topics' span


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pushdown") / "log"
    storage, path = open_storage(str(root))
    generate_log_dir(storage, path, SPECS, seed=8)
    # One segment without its indexes: it is read whole, and its rows are still right.
    third = sorted((root / "created-1").glob("*.index"))[2]
    third.unlink()
    third.with_suffix(".timeindex").unlink()
    return root


def both(spark: Any, log: Path, where: Any) -> tuple[Any, Any]:
    reader = spark.read.format("kafka-segments")
    cols = ["topic", "partition", "offset", "timestamp", "key", "value", "headers", "batch_position"]
    pushed = reader.load(str(log)).where(where).select(cols)
    plain = reader.option("pushdown", "false").load(str(log)).where(where).select(cols)
    return pushed, plain


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    low=st.integers(0, 1600),
    width=st.integers(0, 400),
    t0=st.integers(-60_000, SPAN),
    t_width=st.integers(0, SPAN // 4),
    topic=st.sampled_from([None, "created", "appended"]),
)
def test_pushed_rows_equal_spark_filtered_rows(
    spark: Any, log: Path, low: int, width: int, t0: int, t_width: int, topic: str | None
) -> None:
    where = F.col("offset").between(low, low + width) & (F.col("timestamp") >= START + t0)
    where = where & (F.col("timestamp") < START + t0 + t_width)
    if topic:
        where = where & (F.col("topic") == topic) & F.col("partition").isin(0, 1)
    pushed, plain = both(spark, log, where)
    assert_df_equality(pushed, plain, ignore_row_order=True, ignore_nullable=True)


def test_offset_only_and_time_only_ranges(spark: Any, log: Path) -> None:
    for where in (
        F.col("offset") == 700,
        F.col("offset") > 1400,
        F.col("timestamp") <= START + 60_000,
        F.col("timestamp").between(START + SPAN // 2, START + SPAN // 2 + 120_000),
    ):
        pushed, plain = both(spark, log, where)
        assert plain.count() > 0
        assert_df_equality(pushed, plain, ignore_row_order=True, ignore_nullable=True)


def test_the_plan_keeps_no_filter_for_what_was_pushed(spark: Any, log: Path) -> None:
    df = spark.read.format("kafka-segments").load(str(log))
    query = df.where((F.col("topic") == "created") & F.col("offset").between(10, 20))
    plan = query._jdf.queryExecution().executedPlan().toString()
    assert "BatchScan kafka-segments" in plan
    assert " Filter " not in plan, plan
    # A condition the source cannot take stays with Spark, alone.
    kept = df.where(F.col("key").isNotNull() & (F.col("offset") >= 10))
    plan = kept._jdf.queryExecution().executedPlan().toString()
    [condition] = [line for line in plan.splitlines() if " Filter " in line]
    assert "key" in condition and "offset" not in condition, plan
    # The windows read: a narrow offset range spans few input partitions' bytes.
    assert query.count() == 2 * 11
