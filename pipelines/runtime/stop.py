"""Stopping a run: the signal that stopped it and the publications that hold a stop until they
are done, SIGINT and SIGTERM cancelling its Spark jobs, waiting until no task runs, and Spark
stopped before the process exits."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pipelines.errors import Terminated
from pipelines.runtime.connect import is_connect
from pipelines.runtime.session import LazySpark


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
_publishing: list[str] = []  # the steps under way that hold a stop (publications among them)
_published: list[str] = []  # what the run has published
_cancelling: list[bool] = []  # whether the run's canceller thread runs (_keep_cancelling)


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
def held(what: str) -> Iterator[None]:
    """A step a stop must not cut in half: a stop that arrived before it stops the run here; one
    that arrives during it is held until it is done, and then stops the run."""
    raise_if_stopped()
    _publishing.append(what)
    try:
        yield
    finally:
        _publishing.pop()
    raise_if_stopped()


@contextmanager
def publishing(what: str = "the output") -> Iterator[None]:
    """Publication is not interrupted (one rename, a manifest commit, removing a marker: `held`),
    and what it published is named when the run then stops."""
    with held(what):
        yield
        _published.append(what)


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
    _cancelling.clear()


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


CANCEL_EVERY_S = 0.2


def _keep_cancelling(spark: Any) -> None:
    """Cancel the stopped run's jobs, and every job it starts after them, until the run ends: a
    library that swallows a cancelled job's error and goes on (great-expectations judging its next
    rule) gets each later job cancelled too, and the run's next check of the stop ends it."""
    import time

    while _stopped_by:
        _cancel_jobs(spark)
        time.sleep(CANCEL_EVERY_S)


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
        if not _cancelling:  # one canceller for the run, from the first signal that is not held
            _cancelling.append(True)
            threading.Thread(target=_keep_cancelling, args=(sc,), name="segpipe-cancel", daemon=True).start()
        if not _in_jvm_call(frame):
            raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    signal.signal(signal.SIGINT, cancel)
    signal.signal(signal.SIGTERM, cancel)


def stop_handlers() -> None:
    """SIGINT and SIGTERM stop a run that starts no Spark (tier --expire, restore-kafka) as they
    stop any other: exit 130 or 143, a publication under way finished first."""
    interrupt_cancels_jobs(LazySpark(lambda: None))
