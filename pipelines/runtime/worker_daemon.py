"""PySpark's Python worker daemon, started with a job's worker modules already loaded.

Spark forks every Python worker from this daemon. Importing numpy, pyarrow, numba and segpipe
and loading numba's compiler back end costs a worker about a second; done here once, every
forked worker starts with them. Which modules is the job's to say: it lists them in the
workers' environment (`session.preload_in_workers`), and this module knows no job. Forking is
only safe from a process with a single thread (the reason PySpark's own daemon imports
nothing): numpy is held to one BLAS thread and pyarrow's
allocator to no background thread, and the thread count is checked after the imports. Where it
cannot be checked or is not one, the plain PySpark daemon runs instead.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable
from socket import socket

PRELOAD_ENV = "SEGPIPE_WORKER_PRELOAD"  # comma-separated module names
BACKEND_MODULE = "pipelines.runtime.numba_backend"


def thread_count() -> int | None:
    """Threads of this process (Linux), None where they cannot be counted."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


def _preload(modules: list[str]) -> None:
    import importlib

    import pyspark.worker  # noqa: F401

    for name in [*modules, BACKEND_MODULE]:  # numba's back end too, once for all
        try:
            importlib.import_module(name)
        except ImportError:  # the task that needs it fails on it, naming it, as without a preload
            continue
    import pyarrow as pa

    # Every task hands its results back as Arrow arrays, and pyarrow's first conversion loads
    # its pandas support (pandas itself where installed: about half a second per worker).
    pa.array([0])
    freeze_loaded()


# Set by Spark in the environment of every Python worker it starts (tasks' and the planner's).
SPARK_RUNTIME_ENV = "SPARK_PYTHON_RUNTIME"


def in_spark_worker() -> bool:
    """Whether this process is a Python worker Spark started."""
    return os.environ.get(SPARK_RUNTIME_ENV) == "PYTHON_WORKER"


def freeze_loaded() -> None:
    """Leave what is loaded now out of every later garbage collection. PySpark's daemons run a
    full gc.collect() after every call a reused worker serves (a task, or the planner asking a
    data source for its schema or partitions); with numba and pyarrow loaded that walks a few
    hundred thousand objects, tens of ms per call. Modules live as long as the process: frozen,
    the collector no longer walks them."""
    gc.collect()
    gc.freeze()


_Worker = Callable[[socket, bool], int]


def quiet_on_hang_up(worker: _Worker) -> _Worker:
    """PySpark's per-connection worker loop, ending the worker quietly once the JVM has hung up.

    The JVM closes a worker's connection as soon as it has read what it needs (a task's failure,
    a cancelled task, a stopping context); a worker still flushing then gets EPIPE, which
    PySpark's daemon prints as a traceback on the job's stderr. There is nobody left to tell,
    so the worker ends (a non-zero code: the daemon does not reuse it) and says nothing.
    """

    def run(sock: socket, authenticated: bool) -> int:
        try:
            return worker(sock, authenticated)
        except (BrokenPipeError, ConnectionResetError):
            return 1

    return run


# What holds a process that imports numpy and pyarrow to one thread: no BLAS threads, no
# allocator thread (a process that forks must run one thread).
ONE_THREAD_ENV = {"OPENBLAS_NUM_THREADS": "1", "JE_ARROW_MALLOC_CONF": "background_thread:false"}


def hold_to_one_thread() -> None:
    """Before anything imports numpy or pyarrow: ONE_THREAD_ENV, where not set otherwise."""
    for name, value in ONE_THREAD_ENV.items():
        os.environ.setdefault(name, value)


def main() -> None:
    hold_to_one_thread()
    modules = [m for m in os.environ.get(PRELOAD_ENV, "").split(",") if m]
    if thread_count() == 1:
        _preload(modules)
        if thread_count() != 1:  # something started a thread: fork from a clean process instead
            os.execv(sys.executable, [sys.executable, "-m", "pyspark.daemon", *sys.argv[1:]])
    from pyspark import daemon

    daemon.worker = quiet_on_hang_up(daemon.worker)  # type: ignore[assignment]
    daemon.manager()


if __name__ == "__main__":
    main()
