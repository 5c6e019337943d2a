"""How many tasks a Spark session runs at once, asked once per session."""

from __future__ import annotations

import weakref
from typing import Any

from pipelines.runtime.connect import is_connect

_PARALLELISM: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()  # by session


def parallelism(spark: Any) -> int:
    """How many tasks the session runs at once: the context's default parallelism; on Spark
    Connect (no context) the partitions Spark gives a frame it sizes itself, asked once."""
    if spark not in _PARALLELISM:
        if is_connect(spark):
            from pyspark.sql.functions import spark_partition_id

            frame = spark.range(0, 1 << 16).select(spark_partition_id().alias("p")).distinct()
            _PARALLELISM[spark] = max(1, frame.count())
        else:
            _PARALLELISM[spark] = spark.sparkContext.defaultParallelism
    return _PARALLELISM[spark]
