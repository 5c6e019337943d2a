"""Spark entry points for local[*] runs and for spark-submit (which passes its own master).

`get_context` starts only the core engine (what `clean` runs on); `get_spark` adds the SQL
session (DataFrames, the `kafka-segments` source), which costs several seconds more to start.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from pipelines.errors import ConfigError
from pipelines.runtime.worker_daemon import PRELOAD_ENV

# segpipe's JVM only moves bytes between Python workers and shuffle files: code from the quick
# compiler is fast enough, and the optimising compiler's threads would take cores from the
# Python workers (measured: 1.5-2 s less per run on 2 cores). Pass
# spark.driver.extraJavaOptions to run with the JVM's defaults instead.
QUICK_JIT = "-XX:TieredStopAtLevel=1"


def _conf(master: str | None, app_name: str, conf: dict[str, Any]) -> Any:
    """The SparkConf segpipe runs with: loopback only, no UI, reused Python workers."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark import SparkConf

    spark_conf = SparkConf().setAppName(app_name)
    if master:
        spark_conf.setMaster(master)
    elif not os.environ.get("PYSPARK_GATEWAY_PORT"):  # set when spark-submit launched this driver
        spark_conf.setMaster(os.environ.get("SEGPIPE_MASTER", "local[*]"))
    defaults = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(max(2, (os.cpu_count() or 2) * 2)),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.worker.reuse": "true",
        "spark.python.daemon.module": "pipelines.runtime.worker_daemon",
        # The JVM talks to its Python workers over Unix domain sockets: on loopback TCP every
        # task waited about 40 ms for a delayed ACK (measured: 28 → 7 ms per task).
        "spark.python.unix.domain.socket.enabled": "true",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.sql.adaptive.enabled": "true",
    }
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):  # the driver JVM is not started yet
        from pipelines.runtime.class_archive import java_options

        defaults["spark.driver.extraJavaOptions"] = " ".join(filter(None, [QUICK_JIT, java_options()]))
    defaults.update({k: str(v) for k, v in conf.items()})
    for key, value in defaults.items():
        if not spark_conf.contains(key):
            spark_conf.set(key, value)
    return spark_conf


def spark_settings(pairs: list[str]) -> dict[str, str]:
    """`--conf NAME=VALUE` flags as Spark settings; anything else is refused before work starts
    (Spark itself would only warn and ignore a name outside `spark.`)."""
    settings: dict[str, str] = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        name = name.strip()
        if not eq or not name:
            raise ConfigError(f"--conf {pair!r}: expected NAME=VALUE")
        if not name.startswith("spark."):
            raise ConfigError(f"--conf {pair!r}: not a Spark setting (their names start with 'spark.')")
        settings[name] = value
    return settings


def get_context(master: str | None = None, app_name: str = "segpipe", **conf: Any) -> Any:
    """A SparkContext whose Python workers run this interpreter (so they see segment_io).

    Under spark-submit the running context and its master are reused; `master` overrides it.
    """
    from pyspark import SparkContext

    sc = SparkContext.getOrCreate(_conf(master, app_name, conf))
    sc.setLogLevel("WARN")
    _quiet_task_failures(sc)
    return sc


def get_spark(master: str | None = None, app_name: str = "segpipe", **conf: Any) -> Any:
    """A SparkSession over `get_context`'s context, with the `kafka-segments` source registered."""
    from pyspark.sql import SparkSession

    from pipelines.sources.kafka_segments import register

    get_context(master, app_name, **conf)
    spark = SparkSession.builder.getOrCreate()  # takes the running context
    register(spark)
    return spark


def preload_in_workers(sc: Any, modules: Sequence[str]) -> None:
    """Python workers forked after this start with `modules` imported (a job names the modules
    its tasks run; see runtime.worker_daemon). Workers of one preload list share one daemon."""
    sc.environment[PRELOAD_ENV] = ",".join(modules)


@contextmanager
def spark_for_command(job_module: str, master: str | None, settings: dict[str, str]) -> Iterator[Any]:
    """The SparkContext of one command-line run: the JVM starts (seconds) while this thread
    imports the job's module; Ctrl-C cancels running jobs; Spark stops before the process ends."""
    with ThreadPoolExecutor(1) as pool:
        starting = pool.submit(get_context, master, **settings)
        importlib.import_module(job_module)
        sc = starting.result()
    interrupt_cancels_jobs(sc)
    try:
        yield sc
    finally:
        stop_before_exit(sc)


def stop_before_exit(sc: Any) -> None:
    """Stop Spark in a process that exits next. The JVM stops as `sc.stop()` stops it; PySpark's
    accumulator-server thread, which notices a shutdown only within a second (it polls once a
    second) and which `sc.stop()` waits for, is left to end with the process."""
    if getattr(sc, "_accumulatorServer", None) is not None:
        sc._accumulatorServer = None  # a daemon thread: it ends with the process
    sc.stop()
    # The JVM PySpark started exits at EOF on its stdin, which is otherwise this process's exit:
    # closed now, the JVM shuts down while this process unwinds.
    proc = getattr(getattr(sc, "_gateway", None), "proc", None)
    if proc is not None and proc.stdin is not None:
        proc.stdin.close()


def interrupt_cancels_jobs(sc: Any) -> None:
    """Ctrl-C cancels the running Spark jobs, then interrupts the caller (PySpark sets this up
    only for a context made on the main thread)."""
    import signal

    def cancel(signum: int, frame: Any) -> None:
        try:
            sc.cancelAllJobs()
        finally:
            raise KeyboardInterrupt()

    signal.signal(signal.SIGINT, cancel)


# A failed task reaches the driver as an exception that carries the worker's whole message; the
# executor's own log lines about it only repeat that message as a traceback on stderr.
_TASK_FAILURE_LOGGERS = ("org.apache.spark.executor.Executor", "org.apache.spark.scheduler.TaskSetManager")


def _quiet_task_failures(sc: Any) -> None:
    jvm = sc._jvm
    level = jvm.org.apache.logging.log4j.Level.OFF
    for name in _TASK_FAILURE_LOGGERS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)
