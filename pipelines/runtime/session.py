"""Spark entry points for local[*] runs and for spark-submit (which passes its own master).

`get_context` starts only the core engine (what `clean` runs on); `get_spark` adds the SQL
session (DataFrames, the `kafka-segments` source), which costs several seconds more to start.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from pipelines.errors import ConfigError, Terminated
from pipelines.runtime.worker_daemon import PRELOAD_ENV

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


def _conf(master: str | None, app_name: str, conf: dict[str, Any], log_level: str = "warn") -> Any:
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

        run_dir = _run_dir(log_level)
        defaults["spark.python.unix.domain.socket.dir"] = run_dir
        log_config = f"-Dlog4j2.configurationFile={os.path.join(run_dir, 'log4j2.properties')}"
        defaults["spark.driver.extraJavaOptions"] = " ".join(
            filter(None, [QUICK_JIT, java_options(), log_config])
        )
    defaults.update({k: str(v) for k, v in conf.items()})
    for key, value in defaults.items():
        if not spark_conf.contains(key):
            spark_conf.set(key, value)
    return spark_conf


# Settings read only when the driver JVM starts: under spark-submit it already runs.
JVM_START_SETTINGS = (
    "spark.driver.memory", "spark.driver.extraJavaOptions", "spark.driver.extraClassPath",
    "spark.driver.extraLibraryPath", "spark.jars", "spark.jars.packages",
)  # fmt: skip


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
        if name in JVM_START_SETTINGS and os.environ.get("PYSPARK_GATEWAY_PORT"):
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


_WITH_SOURCES: set[int] = set()  # the sessions (by id) the kafka-segments source is registered in


def get_spark(master: str | None = None, app_name: str = "segpipe", sources: bool = True, **conf: Any) -> Any:
    """A SparkSession over `get_context`'s context, with the `kafka-segments` source registered
    (`sources`; a job that reads no records through it leaves it to `with_sources`: registering
    costs over a second)."""
    from pyspark.sql import SparkSession

    get_context(master, app_name, **conf)
    spark = SparkSession.builder.getOrCreate()  # takes the running context
    return with_sources(spark) if sources else spark


def with_sources(spark: Any) -> Any:
    """`spark` with the `kafka-segments` source registered (once: Spark warns when a source is
    registered again)."""
    from pipelines.sources.kafka_segments import register

    if id(spark) not in _WITH_SOURCES:
        register(spark)
        _WITH_SOURCES.add(id(spark))
    return spark


class LazySpark:
    """A run's Spark, started at first use: work small enough for the driver's own threads, or a
    plan with nothing for Spark to do, never pays for a JVM (seconds). `start` returns a
    SparkContext or a SparkSession; the SQL session over the context is made when one is asked
    for (a clean runs on the core engine alone)."""

    def __init__(self, start: Callable[[], Any]) -> None:
        self._start: Callable[[], Any] | None = start
        self._spark: Any = None
        self._hooks: list[Callable[[Any], Any]] = []

    @classmethod
    def of(cls, spark: Any) -> LazySpark:
        """A running SparkSession or SparkContext (a LazySpark is returned as it is)."""
        if isinstance(spark, LazySpark):
            return spark
        lazy = cls(lambda: spark)
        lazy.context()
        return lazy

    @property
    def started(self) -> bool:
        return self._spark is not None

    def on_start(self, hook: Callable[[Any], Any]) -> None:
        """Call `hook(context)` once Spark runs (at once if it does), before any job of ours."""
        if self._spark is not None:
            hook(self.context())
        else:
            self._hooks.append(hook)

    def context(self) -> Any:
        if self._spark is None:
            assert self._start is not None
            self._spark, self._start = self._start(), None
            for hook in self._hooks:
                hook(self.context())
        return getattr(self._spark, "sparkContext", self._spark)

    def session(self) -> Any:
        self.context()
        if hasattr(self._spark, "sparkContext"):
            return self._spark
        from pyspark.sql import SparkSession

        return SparkSession.builder.getOrCreate()  # takes the running context


def session_of(spark: Any) -> Any:
    """The SparkSession behind a session, a context or a LazySpark (starting it)."""
    return LazySpark.of(spark).session()


def context_of(spark: Any) -> Any:
    """The SparkContext behind a context, a session or a LazySpark (starting it)."""
    return LazySpark.of(spark).context()


def preload_in_workers(sc: Any, modules: Sequence[str]) -> None:
    """Python workers forked after this start with `modules` imported (a job names the modules
    its tasks run; see runtime.worker_daemon). Workers of one preload list share one daemon."""
    sc.environment[PRELOAD_ENV] = ",".join(modules)


@contextmanager
def spark_for_command(
    job_modules: Sequence[str], master: str | None, settings: dict[str, str], log_level: str = "warn"
) -> Iterator[Any]:
    """The SparkContext of one command-line run: the JVM starts (seconds) while this thread
    imports the job's modules; Ctrl-C cancels running jobs; Spark stops before the process ends."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")  # read when great-expectations loads
    with ThreadPoolExecutor(1) as pool:
        starting = pool.submit(get_context, master, "segpipe", log_level, **settings)
        for module in job_modules:
            importlib.import_module(module)
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


_stopped_by: list[int] = []  # the signal that stopped this process's run, if any
_published: list[bool] = []  # set once the run's publication starts: a stop comes too late


def stopped_by() -> int | None:
    """SIGINT or SIGTERM if one of them stopped the run (whatever exception it surfaced as:
    raised inside a call to the JVM, PySpark reports a broken connection instead)."""
    return _stopped_by[-1] if _stopped_by else None


def raise_if_stopped() -> None:
    """Between stages and before publishing: a stop signal that arrived while the main thread
    waited for the JVM outside a job (nothing to cancel) takes effect here."""
    import signal

    if _stopped_by:
        raise Terminated() if _stopped_by[-1] == signal.SIGTERM else KeyboardInterrupt()


@contextmanager
def publishing() -> Iterator[None]:
    """Publication is not interrupted: a stop that arrived before it stops the run here; one that
    arrives during it (one rename, or removing a marker) is too late and ignored."""
    raise_if_stopped()
    _published.append(True)
    yield


def _in_jvm_call(frame: Any) -> bool:
    """Whether the main thread is inside a call to the JVM (py4j) at `frame`."""
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith("py4j"):
            return True
        frame = frame.f_back
    return False


def _cancel_jobs(sc: Any) -> None:
    """Cancel running jobs; a context the stopping run has already stopped, or a LazySpark not
    started, has none."""
    if isinstance(sc, LazySpark):
        if not sc.started:
            return
        sc = sc.context()
    with contextlib.suppress(Exception):
        sc.cancelAllJobs()


def settle(sc: Any, timeout_s: float = 60.0) -> None:
    """Cancel the context's jobs and wait (bounded) until no task runs anywhere. A cancelled job
    ends at once, but its tasks (and their Python workers) stop only later: what they write must
    land before a failed run removes its staging, or it would recreate a directory just removed."""
    import time

    _cancel_jobs(sc)
    deadline = time.monotonic() + timeout_s
    with contextlib.suppress(Exception):  # a stopped context has no tasks left to wait for
        tracker = sc._jsc.sc().statusTracker()
        while time.monotonic() < deadline:
            if sum(e.numRunningTasks() for e in tracker.getExecutorInfos()) == 0:
                return
            time.sleep(0.1)  # bounded by the deadline


def interrupt_cancels_jobs(sc: Any) -> None:
    """SIGINT (Ctrl-C) and SIGTERM stop the run (`sc`: a context or a LazySpark): its Spark jobs
    are cancelled (from another thread: the JVM connection of the main thread may be busy) and the
    main thread is interrupted with KeyboardInterrupt or Terminated, unless it is waiting for the
    JVM, where the cancelled
    job ends the wait with an error instead (raising inside py4j breaks its connection).
    `stopped_by` tells either way. PySpark sets up SIGINT only for a context made on the main
    thread, and nothing for SIGTERM."""
    import signal
    import threading

    _stopped_by.clear()
    _published.clear()

    def cancel(signum: int, frame: Any) -> None:
        if _published:
            return  # the output is being published or out; the run only finishes its report
        _stopped_by.append(signum)
        threading.Thread(target=_cancel_jobs, args=(sc,), name="segpipe-cancel", daemon=True).start()
        if not _in_jvm_call(frame):
            raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    signal.signal(signal.SIGINT, cancel)
    signal.signal(signal.SIGTERM, cancel)


# A failed task reaches the driver as an exception that carries the worker's whole message; the
# executor's own log lines about it only repeat that message as a traceback on stderr.
_TASK_FAILURE_LOGGERS = ("org.apache.spark.executor.Executor", "org.apache.spark.scheduler.TaskSetManager")


def _quiet_task_failures(sc: Any) -> None:
    jvm = sc._jvm
    level = jvm.org.apache.logging.log4j.Level.OFF
    for name in _TASK_FAILURE_LOGGERS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)
