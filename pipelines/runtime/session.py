"""Spark entry points: local[*] runs, spark-submit (which passes its own master) and Spark
Connect (`--spark-remote` or PySpark's SPARK_REMOTE).

Every job runs on a SparkSession through DataFrame operations (runtime.dataflow), so the same
code runs on a classic session and on a Spark Connect one; what only a classic session has (the
status tracker, worker preloading, waiting for cancelled tasks) is asked for here and nowhere else.
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
import weakref
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from pipelines.errors import ConfigError, Terminated
from pipelines.runtime.local_workers import LocalWorkers
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


# The sessions the kafka-segments source is registered in (weak: a stopped session's id may return).
_WITH_SOURCES: weakref.WeakSet[Any] = weakref.WeakSet()

# Settings every session of segpipe's runs with, Spark Connect's too (runtime SQL settings): a
# batch of pickled items handed to a Python task stays far below Arrow's 2 GiB per column.
SESSION_SETTINGS = {
    "spark.sql.execution.arrow.maxBytesPerBatch": str(64 * 2**20),
}


def remote_url(master: str | None, remote: str | None) -> str | None:
    """The Spark Connect server a run talks to: `remote` (--spark-remote), else PySpark's own
    SPARK_REMOTE unless a master is named; a master and a remote together are refused."""
    if remote and master:
        raise ConfigError("--master and --spark-remote name two different Sparks: pass one of them")
    if remote or master:
        return remote or None
    return os.environ.get("SPARK_REMOTE") or None


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
        spark = _connect(url, app_name, conf)
    else:
        get_context(master, app_name, log_level, **conf)
        spark = SparkSession.builder.getOrCreate()  # takes the running context
        for key, value in SESSION_SETTINGS.items():
            if key not in conf:
                spark.conf.set(key, value)
    return with_sources(spark) if sources else spark


def _connect(url: str, app_name: str, conf: dict[str, Any]) -> Any:
    """A Spark Connect session at `url`, with segpipe's session settings and the run's own
    (`--conf`: runtime settings only; the server's own are its operator's)."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import SparkSession

    if not url.startswith("sc://"):
        raise ConfigError(f"--spark-remote {url!r}: a Spark Connect URL starts with sc://")
    spark = SparkSession.builder.remote(url).appName(app_name).getOrCreate()
    for key, value in {**SESSION_SETTINGS, **{k: str(v) for k, v in conf.items()}}.items():
        try:
            spark.conf.set(key, value)
        except AnalysisException as exc:  # a static setting: fixed when the server started
            raise ConfigError(f"--conf {key}: the Spark Connect server does not take it ({exc})") from exc
    return spark


def is_connect(spark: Any) -> bool:
    """Whether `spark` is a Spark Connect session (no SparkContext, no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def with_sources(spark: Any) -> Any:
    """`spark` with the `kafka-segments` source registered (once: Spark warns when a source is
    registered again)."""
    from pipelines.sources.kafka_segments import register

    if spark not in _WITH_SOURCES:
        register(spark)
        _WITH_SOURCES.add(spark)
    return spark


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
    its tasks run; see runtime.worker_daemon). Workers of one preload list share one daemon. On
    Spark Connect the server's workers are its own: they import what a task needs as it runs."""
    if not is_connect(spark):
        spark.sparkContext.environment[PRELOAD_ENV] = ",".join(modules)


@contextmanager
def spark_for_command(
    job_modules: Sequence[str],
    master: str | None,
    settings: dict[str, str],
    log_level: str = "warn",
    remote: str | None = None,
) -> Iterator[Any]:
    """The SparkSession of one command-line run (classic, or Spark Connect where a remote is
    named): Spark starts (seconds) while this thread imports the job's modules; Ctrl-C cancels
    running jobs; Spark stops before the process ends."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")  # read when great-expectations loads
    with ThreadPoolExecutor(1) as pool:
        starting = pool.submit(get_spark, master, "segpipe", False, remote, log_level, **settings)
        modules = [importlib.import_module(module) for module in job_modules]
        spark = starting.result()
    interrupt_cancels_jobs(spark)
    warming = warm_up(spark, [w for m in modules for w in getattr(m, "WORKER_MODULES", ())])
    try:
        yield spark
    finally:
        warming.stop()
        stop_before_exit(spark)


WARM_UP_GROUP = "segpipe-warm-up"


class _WarmUp:
    """A small job run beside the driver's own first work (the scan and plan of a run): a run's
    first Spark job otherwise pays for starting the Python workers (importing the job's worker
    modules) and for loading Spark's SQL engine, measured at 2.8 s on 2 cores, before it does
    any work. Its failure changes nothing: the run's own jobs start what they need."""

    def __init__(self, spark: Any, workers: Sequence[str]) -> None:
        import threading

        self._spark = spark
        self._thread = threading.Thread(
            target=self._run, args=(workers,), name="segpipe-warm-up", daemon=True
        )
        self._thread.start()

    def _run(self, workers: Sequence[str]) -> None:
        from pipelines.runtime import dataflow

        with contextlib.suppress(Exception):
            if is_connect(self._spark):
                self._spark.addTag(WARM_UP_GROUP)
            else:
                preload_in_workers(self._spark, workers)
                self._spark.sparkContext.setJobGroup(WARM_UP_GROUP, "segpipe: starting Python workers")
            tasks = list(range(parallelism(self._spark)))
            mapped = dataflow.each(self._spark, tasks, lambda task: [(task % 2, task)])
            dataflow.collected(dataflow.routed(mapped, 2, lambda part, tasks: [(part, sum(tasks))]))

    def stop(self, timeout_s: float = 10.0) -> None:
        """Cancel it if it still runs (a run that ended first), and let it end (bounded)."""
        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                if is_connect(self._spark):
                    self._spark.interruptTag(WARM_UP_GROUP)
                else:
                    self._spark.sparkContext.cancelJobGroup(WARM_UP_GROUP)
            self._thread.join(timeout_s)


def warm_up(spark: Any, workers: Sequence[str]) -> _WarmUp:
    """Start the warm-up job (`workers`: the modules the run's tasks preload, see
    preload_in_workers) in a thread of its own."""
    return _WarmUp(spark, workers)


def stop_before_exit(spark: Any) -> None:
    """Stop Spark in a process that exits next (a Spark Connect session is released; its server
    runs on). The JVM stops as `sc.stop()` stops it; PySpark's accumulator-server thread, which
    notices a shutdown only within a second (it polls once a second) and which `sc.stop()` waits
    for, is left to end with the process."""
    if is_connect(spark):
        with contextlib.suppress(Exception):  # a server already gone has nothing to release
            spark.stop()
        return
    sc = getattr(spark, "sparkContext", spark)
    if getattr(sc, "_accumulatorServer", None) is not None:
        sc._accumulatorServer = None  # a daemon thread: it ends with the process
    sc.stop()
    # The JVM PySpark started exits at EOF on its stdin, which is otherwise this process's exit:
    # closed now, the JVM shuts down while this process unwinds.
    proc = getattr(getattr(sc, "_gateway", None), "proc", None)
    if proc is not None and proc.stdin is not None:
        proc.stdin.close()


# A stop belongs to the run under way, never to the process: a publication holds it until its one
# rename or commit is done, and a stop that arrives after it still stops the run (a later step of
# `segpipe run`, the report, an in-place run's next commit).
_stopped_by: list[int] = []  # the signal that stopped the run, if any
_publishing: list[str] = []  # the publications under way (held stops)
_published: list[str] = []  # what the run has published


def stopped_by() -> int | None:
    """SIGINT or SIGTERM if one of them stopped the run (whatever exception it surfaced as:
    raised inside a call to the JVM, PySpark reports a broken connection instead)."""
    return _stopped_by[-1] if _stopped_by else None


def published() -> list[str]:
    """What the run published before it stopped (for the line the stop ends with)."""
    return list(_published)


def raise_if_stopped() -> None:
    """Between stages, steps and publications: a stop signal that arrived while the main thread
    waited for the JVM outside a job (nothing to cancel), or during a publication, takes effect
    here."""
    import signal

    if _stopped_by:
        raise Terminated() if _stopped_by[-1] == signal.SIGTERM else KeyboardInterrupt()


@contextmanager
def publishing(what: str = "the output") -> Iterator[None]:
    """Publication is not interrupted: a stop that arrived before it stops the run here; one that
    arrives during it (one rename, a manifest commit, removing a marker) is held until it is done,
    and then stops the run."""
    raise_if_stopped()
    _publishing.append(what)
    try:
        yield
    finally:
        _publishing.pop()
    _published.append(what)
    raise_if_stopped()


def withdraw(what: str) -> None:
    """A publication that was a step inside the run, not its output (an in-place run's staging in
    its tier, which its commit then publishes): not named as published when the run stops."""
    if what in _published:
        _published.remove(what)


def begin_run() -> None:
    """A new run of this process: no stop, nothing published."""
    _stopped_by.clear()
    _publishing.clear()
    _published.clear()


# Modules whose frames mean the main thread waits on Spark: the JVM's (py4j) or a Spark Connect
# server's (gRPC). An exception raised there would break the connection instead of ending the wait.
_SPARK_CALL_MODULES = ("py4j", "grpc", "pyspark.sql.connect.client")


def _in_jvm_call(frame: Any) -> bool:
    """Whether the main thread is inside a call to Spark (the JVM, or a Connect server) at `frame`."""
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith(_SPARK_CALL_MODULES):
            return True
        frame = frame.f_back
    return False


def _cancel_jobs(spark: Any) -> None:
    """Cancel running jobs (a Spark Connect session's operations); a context the stopping run has
    already stopped, or a LazySpark not started, has none."""
    if isinstance(spark, LazySpark):
        if not spark.started:
            return
        spark = spark.session()
    with contextlib.suppress(Exception):
        if is_connect(spark):
            spark.interruptAll()
        else:
            getattr(spark, "sparkContext", spark).cancelAllJobs()


def settle(spark: Any, timeout_s: float = 60.0) -> None:
    """Cancel the run's jobs and wait (bounded) until no task runs anywhere. A cancelled job
    ends at once, but its tasks (and their Python workers) stop only later: what they write must
    land before a failed run removes its staging, or it would recreate a directory just removed.
    A Spark Connect server does not say what its executors run: there the jobs are only
    interrupted (README: what differs on Spark Connect)."""
    import time

    _cancel_jobs(spark)
    if isinstance(spark, LazySpark):
        if not spark.started:
            return
        spark = spark.session()
    if is_connect(spark):
        return
    sc = getattr(spark, "sparkContext", spark)
    deadline = time.monotonic() + timeout_s
    with contextlib.suppress(Exception):  # a stopped context has no tasks left to wait for
        tracker = sc._jsc.sc().statusTracker()
        while time.monotonic() < deadline:
            if sum(e.numRunningTasks() for e in tracker.getExecutorInfos()) == 0:
                return
            time.sleep(0.1)  # bounded by the deadline


def interrupt_cancels_jobs(sc: Any) -> None:
    """SIGINT (Ctrl-C) and SIGTERM stop the run (`sc`: a session, a context or a LazySpark): its Spark jobs
    are cancelled (from another thread: the JVM connection of the main thread may be busy) and the
    main thread is interrupted with KeyboardInterrupt or Terminated, unless it is waiting for the
    JVM, where the cancelled
    job ends the wait with an error instead (raising inside py4j breaks its connection).
    `stopped_by` tells either way. PySpark sets up SIGINT only for a context made on the main
    thread, and nothing for SIGTERM."""
    import signal
    import threading

    begin_run()

    def cancel(signum: int, frame: Any) -> None:
        _stopped_by.append(signum)
        if _publishing:
            return  # held: the publication finishes, then publishing() stops the run
        threading.Thread(target=_cancel_jobs, args=(sc,), name="segpipe-cancel", daemon=True).start()
        if not _in_jvm_call(frame):
            raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    signal.signal(signal.SIGINT, cancel)
    signal.signal(signal.SIGTERM, cancel)


def stop_handlers() -> None:
    """SIGINT and SIGTERM stop a run that starts no Spark (tier --expire, restore-kafka) as they
    stop any other: exit 130 or 143, a publication under way finished first."""
    interrupt_cancels_jobs(LazySpark(lambda: None))


# A failed task reaches the driver as an exception that carries the worker's whole message; the
# executor's own log lines about it only repeat that message as a traceback on stderr.
_TASK_FAILURE_LOGGERS = ("org.apache.spark.executor.Executor", "org.apache.spark.scheduler.TaskSetManager")


def _quiet_task_failures(sc: Any) -> None:
    jvm = sc._jvm
    level = jvm.org.apache.logging.log4j.Level.OFF
    for name in _TASK_FAILURE_LOGGERS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)
