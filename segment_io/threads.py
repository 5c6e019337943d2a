"""Work on threads of this process that a stop ends whole: when a call here returns or raises,
no work item runs and none will start.

A stop signal raises its exception in the main thread wherever it is, also inside a thread
pool's bookkeeping: `concurrent.futures.ThreadPoolExecutor` records a new thread only after
`Thread.start()` returns, so a stop that lands inside that call leaves a thread the pool never
joins, which takes queued items and writes into a staging the stopped run has just removed.
And an fsspec client sends a request from its own I/O thread while the caller waits, so an
interrupted wait leaves the request in flight, to land after the stopped run removed what it
wrote. Here a thread takes an item only under a lock, only while the call is not stopped, and
the caller waits, whatever ended the call, until no item is under way (a request to a store is
bounded by the client's own time-outs)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


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


def in_threads(work: Callable[[T], R], items: Sequence[T], threads: int, name: str) -> list[R]:
    """`work(item)` for every item on up to `threads` threads named `name`_N, the results in item
    order, items taken in their order. The first error a work item raises is raised here once the
    items under way have ended (the rest never start); an exception raised in the calling thread
    meanwhile (a stop signal) leaves the same way."""
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

    count = max(1, min(threads, len(items)))
    workers = [threading.Thread(target=loop, name=f"{name}_{n}", daemon=True) for n in range(count)]
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


def request_to_its_end(request: Callable[[], R]) -> R:
    """`request()`, a change to a store, run to its end even where the calling thread is
    interrupted meanwhile. Python raises a stop signal in the main thread only: from there the
    request runs on a thread of its own, and the interruption is raised once it has ended."""
    if threading.current_thread() is not threading.main_thread():
        return request()
    return in_threads(lambda _: request(), [None], 1, "segpipe-store-request")[0]
