"""Spark entry points: local[*] runs, spark-submit (which passes its own master) and Spark
Connect (`--spark-remote` or PySpark's SPARK_REMOTE).

Every job runs on a SparkSession through DataFrame operations (runtime.dataflow), so the same
code runs on a classic session and on a Spark Connect one; what only a classic session has (the
status tracker, worker preloading, waiting for cancelled tasks) is asked for here and nowhere else.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import sys
import tempfile
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from pipelines.config.tuning import MASTER, tuned
from pipelines.errors import ConfigError
from pipelines.runtime.class_archive import java_options
from pipelines.runtime.connect import connect, is_connect, remote_url
from pipelines.runtime.connect_artifacts import check_workers
from pipelines.runtime.local_workers import LocalWorkers
from pipelines.runtime.parallelism import parallelism
from pipelines.runtime.submitted import under_spark_submit
from pipelines.runtime.worker_daemon import PRELOAD_ENV
from segment_io.storage import loaded_clients

# segpipe's JVM only moves bytes between Python workers and shuffle files: code from the quick
# compiler is fast enough, and the optimising compiler's threads would take cores from the
# Python workers (measured: 1.5-2 s less per run on 2 cores). Pass
# spark.driver.extraJavaOptions to run with the JVM's defaults instead.
QUICK_JIT = "-XX:TieredStopAtLevel=1"

# Spark's own log, on stderr: warnings and errors, without the warning every start prints about
# Hadoop's native library (there is none in the pyspark distribution, nor a need for it).
LOG4J2 = """\
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
"""


def _run_dir(log_level: str) -> str:
    """A directory of this process's own for Spark: the worker sockets (Spark leaves them behind
    in the temporary directory otherwise) and the log configuration. Removed at exit."""
    # Socket paths are limited to about 107 bytes and Spark names them `.<uuid>.sock` (42 bytes):
    # a long temporary directory falls back to /tmp.
    base = tempfile.gettempdir()
    run_dir = tempfile.mkdtemp(prefix="segpipe-spark-", dir=base if len(base) <= 40 else "/tmp")
    atexit.register(shutil.rmtree, run_dir, True)
    with open(os.path.join(run_dir, "log4j2.properties"), "w") as handle:
        handle.write(LOG4J2.format(level=log_level))
    return run_dir


DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def driver_java_options(*more: str) -> str:
    """The options segpipe starts a driver JVM with (its own, or spark-submit's for a scheduler's
    task): the quick compiler, and the class archive where this install has one."""
    return " ".join(filter(None, [QUICK_JIT, java_options(), *more]))


def _conf(master: str | None, app_name: str, conf: dict[str, Any], log_level: str = "warn") -> Any:
    """The SparkConf segpipe runs with: loopback only, no UI, reused Python workers."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark import SparkConf

    spark_conf = SparkConf().setAppName(app_name)
    if master:
        spark_conf.setMaster(master)
    elif not under_spark_submit():  # else the master is the submitter's
        spark_conf.setMaster(tuned(MASTER))
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
    if not under_spark_submit():  # the driver JVM is not started yet
        run_dir = _run_dir(log_level)
        defaults["spark.python.unix.domain.socket.dir"] = run_dir
        log_config = f"-Dlog4j2.configurationFile={os.path.join(run_dir, 'log4j2.properties')}"
        defaults[DRIVER_JAVA_OPTIONS] = driver_java_options(log_config)
    defaults.update({k: str(v) for k, v in conf.items()})
    for key, value in defaults.items():
        if not spark_conf.contains(key):
            spark_conf.set(key, value)
    return spark_conf


# Settings read only when the driver JVM starts: under spark-submit it already runs.
JVM_START_SETTINGS = (
    "spark.driver.memory",
    DRIVER_JAVA_OPTIONS,
    "spark.driver.extraClassPath",
    "spark.driver.extraLibraryPath",
    "spark.jars",
    "spark.jars.packages",
)


def check_master(master: str | None, timeout_s: float = 5.0) -> None:
    """Refuse at once a `spark://` master that none of its addresses answers (Spark itself keeps
    retrying for about a minute and then prints hundreds of lines)."""
    if not master or not master.startswith("spark://"):
        return
    failures = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=timeout_s).close()
            return
        except (OSError, ValueError) as exc:
            failures.append(f"{address}: {exc}")
    raise ConfigError(f"cannot reach the Spark master {master} ({'; '.join(failures)})")


def spark_settings(pairs: list[str]) -> dict[str, str]:
    """`--conf NAME=VALUE` flags as Spark settings; anything else is refused before work starts
    (Spark itself would only warn and ignore a name outside `spark.`), as are settings the driver
    JVM reads at its start when it already runs (under spark-submit)."""
    settings: dict[str, str] = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        name = name.strip()
        if not eq or not name:
            raise ConfigError(f"--conf {pair!r}: expected NAME=VALUE")
        if not name.startswith("spark."):
            raise ConfigError(f"--conf {pair!r}: not a Spark setting (their names start with 'spark.')")
        if name in JVM_START_SETTINGS and under_spark_submit():
            raise ConfigError(
                f"--conf {name}: read only when the driver JVM starts, and under spark-submit it already "
                "runs; pass it to spark-submit's own --conf"
            )
        settings[name] = value
    return settings


def get_context(
    master: str | None = None, app_name: str = "segpipe", log_level: str = "warn", **conf: Any
) -> Any:
    """A SparkContext whose Python workers run this interpreter (so they see segment_io).

    Under spark-submit the running context and its master are reused; `master` overrides it.
    `log_level` is Spark's own log level (on stderr).
    """
    from pyspark import SparkContext

    sc = SparkContext.getOrCreate(_conf(master, app_name, conf, log_level))
    sc.setLogLevel(log_level.upper())
    _quiet_task_failures(sc)
    return sc


# The sessions the kafka-segments source is registered in (weak: a stopped session's id may return).
_WITH_SOURCES: weakref.WeakSet[Any] = weakref.WeakSet()

# Settings every session of segpipe's runs with, Spark Connect's too (runtime SQL settings): a
# batch of pickled items handed to a Python task stays far below Arrow's 2 GiB per column.
SESSION_SETTINGS = {
    "spark.sql.execution.arrow.maxBytesPerBatch": str(64 * 2**20),
}


def get_spark(
    master: str | None = None,
    app_name: str = "segpipe",
    sources: bool = True,
    remote: str | None = None,
    log_level: str = "warn",
    **conf: Any,
) -> Any:
    """A SparkSession: over `get_context`'s context (classic), or a Spark Connect session where a
    remote is named (`remote_url`), with the `kafka-segments` source registered (`sources`; a
    job that reads no records through it leaves it to `with_sources`: registering costs over a
    second)."""
    from pyspark.sql import SparkSession

    url = remote_url(master, remote)
    if url is not None:
        spark = connect(url, app_name, {**SESSION_SETTINGS, **{k: str(v) for k, v in conf.items()}})
    else:
        get_context(master, app_name, log_level, **conf)
        spark = SparkSession.builder.getOrCreate()  # takes the running context
        for key, value in SESSION_SETTINGS.items():
            if key not in conf:
                spark.conf.set(key, value)
    return with_sources(spark) if sources else spark


def with_sources(spark: Any) -> Any:
    """`spark` with the `kafka-segments` source registered (once: Spark warns when a source is
    registered again)."""
    from pipelines.sources.kafka_segments import register

    if spark not in _WITH_SOURCES:
        if is_connect(spark):  # the source's reads run on the server's workers: segpipe must be there
            check_workers(spark, ("pipelines.sources.kafka_segments",))
        register(spark)
        _WITH_SOURCES.add(spark)
    return spark


class LazySpark:
    """A run's Spark, started at first use: work small enough for the driver's own threads, or a
    plan with nothing for Spark to do, never pays for a JVM (seconds). `start` returns a
    SparkSession (classic or Spark Connect) or a SparkContext (its session is made then)."""

    def __init__(self, start: Callable[[], Any], local: LocalWorkers | None = None) -> None:
        self._start: Callable[[], Any] | None = start
        # Processes of the driver's machine doing a local master's work without Spark's start.
        self.local = local
        self._spark: Any = None
        self._hooks: list[Callable[[Any], Any]] = []

    @classmethod
    def of(cls, spark: Any) -> LazySpark:
        """A running SparkSession or SparkContext (a LazySpark is returned as it is)."""
        if isinstance(spark, LazySpark):
            return spark
        lazy = cls(lambda: spark)
        lazy.session()
        return lazy

    @property
    def started(self) -> bool:
        return self._spark is not None

    def on_start(self, hook: Callable[[Any], Any]) -> None:
        """Call `hook(session)` once Spark runs (at once if it does), before any job of ours."""
        if self._spark is not None:
            hook(self._spark)
        else:
            self._hooks.append(hook)

    def session(self) -> Any:
        if self._spark is None:
            assert self._start is not None
            started, self._start = self._start(), None
            if not hasattr(started, "sql"):  # a SparkContext
                from pyspark.sql import SparkSession

                started = SparkSession.builder.getOrCreate()  # takes the running context
            self._spark = started
            for hook in self._hooks:
                hook(started)
        return self._spark

    def parallelism(self) -> int:
        """Tasks at once: the driver's processes where they do the work, else Spark's cores."""
        return self.local.cores if self.local is not None else parallelism(self.session())


def session_of(spark: Any) -> Any:
    """The SparkSession behind a session, a context or a LazySpark (starting it)."""
    return LazySpark.of(spark).session()


def preload_in_workers(spark: Any, modules: Sequence[str]) -> None:
    """Python workers forked after this start with `modules` imported (a job names the modules
    its tasks run; see runtime.worker_daemon); a classic context's list only grows (grown_preload).
    On Spark Connect the server's workers are its own: they import what a task needs as it runs, and
    are first asked to import the job's modules once, so that a dependency the server's Python
    lacks is named before any work. Workers of a classic session also preload the object-store
    clients the driver has loaded: its tasks open the same stores."""
    if is_connect(spark):
        check_workers(spark, modules)
    else:
        environment = spark.sparkContext.environment
        wanted = [*modules, *loaded_clients()]
        environment[PRELOAD_ENV] = grown_preload(environment.get(PRELOAD_ENV, ""), wanted)


def grown_preload(preloaded: str, wanted: Sequence[str]) -> str:
    """The preload list a context's workers get: what it preloads already, then what is new.
    Spark keeps one worker daemon per distinct worker environment, so a list that only grows
    starts a daemon (a second or more of imports) only for a job that needs a module none
    before it did: jobs run one after another in one session (a job file's steps, an
    application's calls) share one daemon once their modules are in."""
    return ",".join(dict.fromkeys(m for m in [*preloaded.split(","), *wanted] if m))


# A failed task reaches the driver as an exception that carries the worker's whole message; the
# executor's own log lines about it only repeat that message as a traceback on stderr.
_TASK_FAILURE_LOGGERS = ("org.apache.spark.executor.Executor", "org.apache.spark.scheduler.TaskSetManager")


def _quiet_task_failures(sc: Any) -> None:
    jvm = sc._jvm
    level = jvm.org.apache.logging.log4j.Level.OFF
    for name in _TASK_FAILURE_LOGGERS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)
