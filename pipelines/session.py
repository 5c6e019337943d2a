"""SparkSession for local[*] runs and for spark-submit (which passes its own master)."""

from __future__ import annotations

import os
import sys
from typing import Any


def get_spark(master: str | None = None, app_name: str = "segpipe", **conf: Any) -> Any:
    """A SparkSession whose Python workers run this interpreter (so they see segment_io).

    Under spark-submit an active session/master is reused; `master` overrides it.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif "spark.master" not in os.environ.get("SPARK_CONF", "") and not os.environ.get("SPARK_SUBMIT"):
        builder = builder.master(os.environ.get("SEGPIPE_MASTER", "local[*]"))
    defaults = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(max(2, (os.cpu_count() or 2) * 2)),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.worker.reuse": "true",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.sql.adaptive.enabled": "true",
    }
    defaults.update({k: str(v) for k, v in conf.items()})
    for key, value in defaults.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    from pipelines.datasource import register

    register(spark)
    return spark
