"""Worker processes on the driver's own machine, for a run whose Spark master is local.

A local master runs its tasks on this machine's cores anyway; for work over files on a local
disk, processes of the driver's own do the same work without what Spark costs before its first
task (the JVM, the SQL engine, Python workers: about 5 s, measured on the 4 GB bench set). One
process per core of the master, forked from the driver itself where it runs a single thread when
they start (the command line holds numpy and pyarrow to the calling thread for this): they begin
with everything the driver has loaded, at no cost. Forking is not safe from a process with other
threads (a lock one of them holds stays held in the fork), so otherwise they fork from a server
that imports the job's modules first (multiprocessing's forkserver: about a second of CPU).

A work function travels pickled by PySpark's cloudpickle, as it would to a Spark task; results
and typed errors come back pickled. A stop (SIGINT, SIGTERM) kills the processes and waits for
them before it propagates, so nothing they write lands after the run removes its staging; a
process that dies (killed, out of memory) fails the run (WorkerLost) instead of hanging, and a
driver that dies takes its processes with it.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import re
import select
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from pipelines.config.tuning import MASTER, tuned
from pipelines.errors import SegpipeError
from pipelines.runtime.submitted import SPARK_MASTER, submitted_master, under_spark_submit
from pipelines.runtime.worker_daemon import BACKEND_MODULE, hold_to_one_thread, thread_count
from segment_io.exit_codes import ExitCode
from segment_io.storage import loaded_clients

T = TypeVar("T")
R = TypeVar("R")

# local, local[N], local[*], local[N,F] and local[*,F] (F: task retries): a master on this machine.
_LOCAL_MASTER = re.compile(r"local(?:\[(\*|\d+)(?:,\d+)?\])?")


def local_cores(master: str | None, settings: dict[str, str], remote: str | None) -> int | None:
    """The cores of the run's master if it is local (this machine), else None: a Spark Connect
    server or a cluster. A driver spark-submit launched has the master it was submitted to,
    unless the run names its own."""
    if remote:
        return None
    chosen = master or settings.get(SPARK_MASTER)
    chosen = chosen or (submitted_master() if under_spark_submit() else tuned(MASTER))
    if chosen is None:  # submitted, and the submitter's JVM did not say where
        return None
    match = _LOCAL_MASTER.fullmatch(chosen.strip())
    if match is None:
        return None
    cores = match.group(1)
    if cores is None:
        return 1
    return (os.cpu_count() or 1) if cores == "*" else max(1, int(cores))


def _worker_start(driver: int) -> None:
    """In a worker: Ctrl-C reaches the whole process group; the driver alone decides to stop. A
    SIGTERM ends the worker, as it would any process (a worker forked from the driver would
    otherwise run the driver's own handler). The worker ends with the `driver` (its pid)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _end_with(driver)


def _end_with(driver: int) -> None:
    """Kill this worker when the driver ends. A driver killed outright (SIGKILL, out of memory)
    runs no shutdown, and its idle workers would wait for work forever: a worker holds the write
    end of its own task pipe (and one forked from a server keeps that server alive), so it never
    reads the end of it. A thread of the worker waits on the driver's pidfd; without pidfds (not
    Linux, a kernel before 5.3) nothing watches."""
    try:
        handle = os.pidfd_open(driver)
    except ProcessLookupError:  # ended already
        os._exit(1)
    except (AttributeError, OSError):
        return

    def watch() -> None:
        select.select([handle], [], [])  # readable once the driver has ended
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="segpipe-driver-watch", daemon=True).start()


def _call(work: bytes, item: bytes) -> bytes:
    """In a worker: the work and its item, unpickled, run, and the result pickled back."""
    from pyspark import cloudpickle

    return cloudpickle.dumps(cloudpickle.loads(work)(cloudpickle.loads(item)))


class WorkerLost(SegpipeError):
    """A worker process of the driver ended without an answer (killed, or out of memory)."""

    exit_code = ExitCode.INTERNAL


class LocalWorkers:
    """A pool of `cores` processes, forked from the driver or from a server that imported
    `modules`; started by `start` (early: at the run's start) or at first use."""

    def __init__(self, cores: int, modules: Sequence[str]) -> None:
        self.cores = cores
        self._modules = list(modules)
        self._pool: ProcessPoolExecutor | None = None
        self._starting: threading.Thread | None = None
        self.forked_from_driver = False  # how the last processes started were started

    def start(self) -> None:
        """Start the processes: forked from here at once where this process runs one thread (the
        run's start, before any flow or Spark), else from a server started in a background thread,
        whose imports (about a second) the caller spends on its own work (the scan)."""
        if self._pool is None and self._starting is None and not self.fork_here():
            self._starting = threading.Thread(
                target=self._try_start, name="segpipe-local-workers", daemon=True
            )
            self._starting.start()

    def _try_start(self) -> None:
        # A start that fails here is made again by the first map, which raises its error.
        with contextlib.suppress(Exception):
            self._start()

    def fork_here(self) -> bool:
        """Fork the processes from this process if it runs one thread, after importing what a
        server would (numba's back end: about a third of a second where the driver had not loaded
        it). False, and nothing started, where another thread runs. True where they run already."""
        if self._pool is not None:
            return True
        if thread_count() != 1:
            return False
        try:
            for name in [*self._modules, BACKEND_MODULE]:
                importlib.import_module(name)
        except Exception:  # the server's start raises it again, at the first map
            return False
        if thread_count() != 1:  # an import started a thread
            return False
        context = multiprocessing.get_context("fork")
        pool = self._pool_of(context)
        self._pool, self.forked_from_driver = pool, True  # a stop while they start: kill() finds them
        try:
            # With fork, the first submit forks every process before the executor starts its thread.
            pool.submit(os.getpid).result()
        except Exception:  # not forked (no memory for a process, say): a server starts them instead
            self.kill()
            return False
        return True

    def _start(self) -> None:
        hold_to_one_thread()  # the server forks the processes: it must hold one thread
        context = multiprocessing.get_context("forkserver")
        # as Spark's workers (session.preload_in_workers): with the driver's store clients too
        context.set_forkserver_preload([*self._modules, *loaded_clients(), BACKEND_MODULE])
        pool = self._pool_of(context)
        # Every process now, as a fork-started pool does: one the pool spawned later, inside a map,
        # could be cut off from the pool's record by a stop signal landing in its start, and would
        # then take work that kill() does not stop.
        pool._launch_processes()  # type: ignore[attr-defined]
        pool.submit(os.getpid).result()  # the server and the processes run from here on
        self._pool, self.forked_from_driver = pool, False

    def _pool_of(self, context: Any) -> ProcessPoolExecutor:
        """The executor of `cores` processes of `context` (fork, or forkserver), not started."""
        return ProcessPoolExecutor(
            self.cores, mp_context=context, initializer=_worker_start, initargs=(os.getpid(),)
        )

    def _started(self) -> ProcessPoolExecutor:
        self._join_start()
        if self._pool is None:  # not started, or the background start failed: started here
            self._start()
        assert self._pool is not None
        return self._pool

    def map(self, work: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """`work(item)` for every item in the processes, the results in item order. The first
        error raised by a work item is raised here (the rest are cancelled); a stop kills the
        processes first."""
        from pyspark import cloudpickle

        pool = self._started()
        pickled = cloudpickle.dumps(work)  # once: a closure may carry a plan or a key list
        futures: list[Future[bytes]] = []
        try:
            # A process that died between two maps (idle, killed) fails the submit itself.
            futures += (pool.submit(_call, pickled, cloudpickle.dumps(i)) for i in items)
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for future in futures:
                error = future.exception() if future in done else None
                if error is not None:
                    raise error
            return [cloudpickle.loads(f.result()) for f in futures]
        except BrokenProcessPool:
            self.kill()
            raise WorkerLost(
                "a worker process of the driver ended without an answer (killed, or out of "
                "memory); nothing was published. SEGPIPE_DRIVER_WORK=off or a cluster's "
                "--master sends the work to Spark"
            ) from None
        except BaseException:
            for future in futures:
                future.cancel()
            self.kill()
            raise

    def kill(self) -> None:
        """Kill the processes and wait for them (a stopped or failed run: nothing of theirs may
        land after this); a later `map` starts new ones."""
        self._join_start()
        pool, self._pool = self._pool, None
        if pool is None:
            return
        # The executor has no public way to end its processes at once (Python 3.14 adds one).
        for process in list(getattr(pool, "_processes", {}).values()):
            process.kill()
        pool.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        self._join_start()
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def _join_start(self) -> None:
        starting, self._starting = self._starting, None
        if starting is not None:
            starting.join()
