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
    elif not os.environ.get("PYSPARK_GATEWAY_PORT"):  # set when spark-submit launched this driver
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
    _quiet_task_failures(spark)
    from pipelines.datasource import register

    register(spark)
    return spark


# A failed task reaches the driver as an exception that carries the worker's whole message; the
# executor's own log lines about it only repeat that message as a traceback on stderr.
_TASK_FAILURE_LOGGERS = ("org.apache.spark.executor.Executor", "org.apache.spark.scheduler.TaskSetManager")


def _quiet_task_failures(spark: Any) -> None:
    jvm = spark.sparkContext._jvm
    level = jvm.org.apache.logging.log4j.Level.OFF
    for name in _TASK_FAILURE_LOGGERS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)
