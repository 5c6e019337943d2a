"""Work run in the driver's own threads, stoppable at any instant: when the call returns or
raises, no work item runs and none will start.

A stop signal raises its exception in the main thread wherever it is, also inside a thread
pool's bookkeeping: `concurrent.futures.ThreadPoolExecutor` records a new thread only after
`Thread.start()` returns, so a stop that lands inside that call leaves a thread the pool never
joins, which takes queued items and writes into a staging the stopped run has just removed
(measured under load: 1 stop in 20 left a half-removed staging behind). Here a thread takes an
item only under a lock, only while the run is not stopped, and the caller waits, whatever ended
the call, until no item is under way."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

THREAD_NAME = "segpipe-driver"


def driver_threads() -> int:
    """Threads for work run in the driver: one per core, at most 8."""
    return max(1, min(8, os.cpu_count() or 1))


class _Items:
    """The items' queue and what is under way, behind one condition."""

    def __init__(self, count: int) -> None:
        self.changed = threading.Condition()
        self.count = count
        self.next = 0  # the next item to take
        self.active = 0  # items under way
        self.stopped = False  # set by a failed item or the caller's own exception
        self.errors: list[BaseException] = []

    def take(self) -> int | None:
        with self.changed:
            if self.stopped or self.next >= self.count:
                return None
            self.next += 1
            self.active += 1
            return self.next - 1

    def done(self, error: BaseException | None) -> None:
        with self.changed:
            self.active -= 1
            if error is not None:
                self.errors.append(error)
                self.stopped = True
            self.changed.notify_all()

    def wait_finished(self) -> None:
        """Until every item is done, or, once stopped, until none is under way."""
        with self.changed:
            while self.active or (self.next < self.count and not self.stopped):
                self.changed.wait()

    def stop_and_wait(self) -> None:
        """No item starts from now on; returns once none is under way."""
        with self.changed:
            self.stopped = True
            while self.active:
                self.changed.wait()


def in_driver_threads(work: Callable[[T], R], items: Sequence[T], threads: int | None = None) -> list[R]:
    """`work(item)` for every item on up to `threads` (driver_threads()) of the driver's threads,
    the results in item order, items taken in their order. The first error a work item raises is
    raised here once the items under way have ended (the rest never start); an exception raised
    in the calling thread meanwhile (a stop signal) leaves the same way."""
    results: list[Any] = [None] * len(items)
    queue = _Items(len(items))

    def loop() -> None:
        while (i := queue.take()) is not None:
            error: BaseException | None = None
            try:
                results[i] = work(items[i])
            except BaseException as exc:  # handed to the caller, which raises it
                error = exc
            queue.done(error)

    count = max(1, min(threads or driver_threads(), len(items)))
    workers = [threading.Thread(target=loop, name=f"{THREAD_NAME}_{n}", daemon=True) for n in range(count)]
    try:
        for worker in workers:
            worker.start()
        queue.wait_finished()
    except BaseException:
        queue.stop_and_wait()
        raise
    if queue.errors:
        raise queue.errors[0]
    return results
