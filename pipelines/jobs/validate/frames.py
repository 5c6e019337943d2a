"""The rows a validation judges, either a pyarrow Table made in the driver (a small log: no Spark
at all) or a Spark DataFrame made by the workers; the few operations the job needs, on both."""

from __future__ import annotations

import base64
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.runtime.session import session_of
from pipelines.runtime.spark_handle import Spark

# A frame of at most this many rows is judged by great-expectations' pandas engine in the driver
# (collected once, where it was made by the workers), where each of its metrics would otherwise
# be a Spark job of its own (measured on the samples: 26 jobs, 5.3 s of a 10.4 s validation).
DRIVER_ROWS = 200_000


def with_key_b64(rows: Any, columns: Sequence[str]) -> Any:
    """`columns` of `rows` and `key_b64`, the key in base64 (null for a null key): the identity a
    failure is reported by."""
    if isinstance(rows, pa.Table):
        keys = rows.column("key").to_pylist()
        encoded = [None if k is None else base64.b64encode(k).decode("ascii") for k in keys]
        return rows.select(list(columns)).append_column("key_b64", pa.array(encoded, pa.string()))
    from pyspark.sql import functions as F

    return rows.select(*columns, F.base64("key").alias("key_b64"))


def of_kind(rows: Any, kind: str, keep: bool = True) -> Any:
    """The rows whose `kind` is `kind` (or, `keep=False`, is not)."""
    if isinstance(rows, pa.Table):
        match = pc.equal(rows.column("kind"), kind)
        return rows.filter(match if keep else pc.invert(match))
    from pyspark.sql import functions as F

    return rows.where((F.col("kind") == kind) if keep else (F.col("kind") != kind))


def collected(rows: Any) -> list[dict[str, Any]]:
    """Every row (a small frame) as a dict."""
    if isinstance(rows, pa.Table):
        return list(rows.to_pylist())
    return [r.asDict() for r in rows.collect()]


@contextmanager
def kept(rows: Any) -> Iterator[Any]:
    """A DataFrame computed once for the several Spark jobs that read it (spilling to disk), and
    released after; a Table is already in memory."""
    if isinstance(rows, pa.Table):
        yield rows
        return
    from pyspark import StorageLevel

    rows = rows.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        yield rows
    finally:
        rows.unpersist()


def judged(spark: Spark, rows: Any) -> tuple[Any, str]:
    """`rows` as great-expectations judges them, with the name of the data source to use: a
    frame of up to DRIVER_ROWS rows as pandas (the driver's engine), a larger one as a Spark
    DataFrame. A DataFrame is counted before it is collected: a large one (an operator suite's
    holds values) never passes the driver."""
    if isinstance(rows, pa.Table):
        if rows.num_rows <= DRIVER_ROWS:
            return rows.to_pandas(), "segpipe-driver"
        return session_of(spark).createDataFrame(rows), "segpipe"
    if rows.limit(DRIVER_ROWS + 1).count() <= DRIVER_ROWS:
        return rows.toPandas(), "segpipe-driver"
    return rows, "segpipe"
