"""The `kafka-segments` source over a Kafka remote tier (`kafkaTier`): the whole tiered topic as
rows, every record as the broker was sent it, and the range options read exactly what Spark's own
filter keeps, through the remote segments' indexes."""

from __future__ import annotations

from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from tests.kip405 import ENCRYPTED, Tier, tier

pytestmark = pytest.mark.spark
COLS = ["topic", "partition", "offset", "timestamp", "key", "value"]


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Tier:
    return tier(ENCRYPTED, tmp_path_factory.mktemp("kafka-tier"))


def frame(spark: Any, t: Tier, **options: str) -> Any:
    reader = spark.read.format("kafka-segments").option("kafkaTier", str(t.settings))
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load(str(t.logdir))


def test_the_source_reads_every_record_of_the_tiered_topic(spark: Any, remote: Tier) -> None:
    rows = frame(spark, remote, topic="kip405").select("partition", "offset", "key", "value").collect()
    assert {(r.partition, r.offset): (bytes(r.key), bytes(r.value)) for r in rows} == remote.produced


@pytest.mark.parametrize(
    "options",
    [{"fromOffset": "3000", "toOffset": "3100"}, {"fromTime": "1795722450300", "toTime": "1795722450400"}],
)
def test_range_options_read_what_the_filter_keeps(spark: Any, remote: Tier, options: dict[str, str]) -> None:
    ranged = frame(spark, remote, topic="kip405", **options)
    whole = frame(spark, remote, topic="kip405")
    if "fromOffset" in options:
        where = F.col("offset").between(int(options["fromOffset"]), int(options["toOffset"]))
    else:
        where = F.col("timestamp").between(int(options["fromTime"]), int(options["toTime"]))
    assert ranged.count() > 0
    assert_df_equality(
        ranged.select(COLS), whole.where(where).select(COLS), ignore_row_order=True, ignore_nullable=True
    )


def test_from_bucket_the_source_reads_the_topic_without_its_metadata_topic(spark: Any, tmp_path: Any) -> None:
    import shutil

    t = tier(ENCRYPTED, tmp_path, copy_logdir=True)
    shutil.rmtree(t.logdir / "__remote_log_metadata-0")
    rows = (
        frame(spark, t, topic="kip405", fromBucket="true")
        .select("partition", "offset", "key", "value")
        .collect()
    )
    assert {(r.partition, r.offset): (bytes(r.key), bytes(r.value)) for r in rows} == t.produced
    with pytest.raises(Exception, match="0-9999 are in neither tier"):  # without it: refused, not 0 rows
        frame(spark, t, topic="kip405").count()
