"""Ranges read by the `kafka-segments` source: the options fromOffset/toOffset/fromTime/toTime
read exactly the rows Spark's own filter keeps on the whole log (every codec, CreateTime out of
order and LogAppendTime, across segments, a segment's indexes missing), and a DataFrame or view
reused across queries answers each query as a fresh one does, whatever the earlier query's
filters were (Spark 4.3 reuses a read planned for one query's pushed filters)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from segment_io.generate import generate_log_dir
from segment_io.generate_spec import TopicSpec
from segment_io.storage import open_storage

pytestmark = pytest.mark.spark

SPECS = [
    TopicSpec("created", partitions=2, records=1500, segment_bytes=32 * 1024, span_ms=3_600_000),
    TopicSpec("appended", records=1000, log_append_time=True, segment_bytes=32 * 1024, span_ms=3_600_000),
]
START, SPAN = 1_700_000_000_000, 3_600_000  # the generator's default start; the topics' span
COLS = ["topic", "partition", "offset", "timestamp", "key", "value", "headers", "batch_position"]


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


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    low=st.integers(0, 1600),
    width=st.integers(0, 400),
    t0=st.integers(-60_000, SPAN),
    t_width=st.integers(1, SPAN // 4),
)
def test_range_options_read_the_rows_spark_filter_keeps(
    spark: Any, log: Path, low: int, width: int, t0: int, t_width: int
) -> None:
    ranged = (
        spark.read.format("kafka-segments")
        .option("fromOffset", str(low))
        .option("toOffset", str(low + width))
        .option("fromTime", str(START + t0))
        .option("toTime", str(START + t0 + t_width - 1))
        .load(str(log))
    )
    where = F.col("offset").between(low, low + width) & (F.col("timestamp") >= START + t0)
    where = where & (F.col("timestamp") < START + t0 + t_width)
    plain = spark.read.format("kafka-segments").load(str(log)).where(where)
    assert_df_equality(ranged.select(COLS), plain.select(COLS), ignore_row_order=True, ignore_nullable=True)


def test_a_range_option_is_the_dataframe_s_for_every_query(spark: Any, log: Path) -> None:
    ranged = spark.read.format("kafka-segments").option("toOffset", "99").load(str(log))
    plain = spark.read.format("kafka-segments").load(str(log)).where(F.col("offset") <= 99)
    first = ranged.count()
    assert first == plain.count() > 0
    created = F.col("topic") == "created"
    assert ranged.where(created).count() == plain.where(created).count() < first
    assert ranged.count() == first
    with pytest.raises(Exception, match="fromOffset"):
        spark.read.format("kafka-segments").option("fromOffset", "x").load(str(log)).count()
    with pytest.raises(Exception, match="holds nothing"):
        spark.read.format("kafka-segments").option("fromTime", "5").option("toTime", "4").load(
            str(log)
        ).count()


def shapes() -> list[Any]:
    """Every filter shape the source once took from Spark, with one it never took."""
    return [
        F.col("topic") == "appended",
        F.col("topic").isin("appended", "created"),
        F.col("partition") == 1,
        F.col("partition").isin(0),
        (F.col("topic") == "created") | (F.col("partition") == 0),
        F.col("offset") == 700,
        F.col("offset") > 1400,
        F.col("offset") >= 1400,
        F.col("offset") < 20,
        F.col("offset") <= 20,
        F.col("offset").between(10, 20),
        F.col("offset").isin(3, 900),
        F.col("timestamp") <= START + 60_000,
        F.col("timestamp").between(START + SPAN // 2, START + SPAN // 2 + 120_000),
        F.col("offset").isNotNull() & F.col("timestamp").isNotNull(),
        F.col("key").isNotNull(),
    ]


def test_a_reused_dataframe_answers_each_query_as_a_fresh_one(spark: Any, log: Path) -> None:
    reused = spark.read.format("kafka-segments").load(str(log))
    whole = spark.read.format("kafka-segments").load(str(log)).count()
    for where in shapes():
        fresh = spark.read.format("kafka-segments").load(str(log)).where(where).count()
        assert reused.where(where).count() == fresh, where
        # The query after it pushes no filter: it reads the whole log, not the last query's rows.
        assert reused.count() == whole, where
        assert reused.groupBy("topic").count().count() == 2, where  # both topics, whatever came before


def test_a_view_answers_each_sql_query_as_a_fresh_one(spark: Any, log: Path) -> None:
    fresh = spark.read.format("kafka-segments").load(str(log))
    fresh.createOrReplaceTempView("reused_log")
    whole = fresh.count()

    def count(sql: str) -> int:
        return int(spark.sql(f"SELECT count(*) AS n FROM reused_log {sql}").first()["n"])

    assert count("") == whole
    appended = spark.read.format("kafka-segments").load(str(log)).where(F.col("topic") == "appended")
    assert count("WHERE topic = 'appended'") == appended.count() < whole
    assert count("WHERE offset < 10") == 3 * 10  # offsets 0-9 of each of the three partitions
    assert count("") == whole


def test_pushdown_true_is_refused_with_the_reason(spark: Any, log: Path) -> None:
    with pytest.raises(Exception, match="fromOffset, toOffset"):
        spark.read.format("kafka-segments").option("pushdown", "true").load(str(log)).count()
    plain = spark.read.format("kafka-segments").option("pushdown", "false").load(str(log))
    assert plain.count() == spark.read.format("kafka-segments").load(str(log)).count() > 0
