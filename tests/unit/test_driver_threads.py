"""Work in the driver's threads: results in item order, the first error raised, and a stop that
lands anywhere in the call leaving no item under way and none to start."""

from __future__ import annotations

import threading

import pytest

from pipelines.runtime.driver_threads import THREAD_NAME, in_driver_threads


class Stop(BaseException):
    """What a stop signal raises in the calling thread."""


class Ledger:
    """Which items started and which ended, under a lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started: list[int] = []
        self.ended: list[int] = []

    def work(self, item: int) -> int:
        with self.lock:
            self.started.append(item)
        total = sum(range(2000))  # a little work, so that threads overlap
        with self.lock:
            self.ended.append(item)
        return item * 2 + total - total


def join_workers() -> None:
    for thread in threading.enumerate():
        if thread.name.startswith(THREAD_NAME + "_"):
            thread.join(timeout=30)
            assert not thread.is_alive()


def test_results_come_in_item_order_and_one_thread_takes_items_in_order() -> None:
    ledger = Ledger()
    assert in_driver_threads(ledger.work, list(range(50)), threads=4) == [i * 2 for i in range(50)]
    one = Ledger()
    assert in_driver_threads(one.work, list(range(10)), threads=1) == [i * 2 for i in range(10)]
    assert one.started == list(range(10))
    assert in_driver_threads(one.work, []) == []


def test_the_first_error_is_raised_and_later_items_never_start() -> None:
    ledger = Ledger()

    def work(item: int) -> int:
        if item == 3:
            raise ValueError("bad item 3")
        return ledger.work(item)

    with pytest.raises(ValueError, match="bad item 3"):
        in_driver_threads(work, list(range(100)), threads=1)
    join_workers()
    assert ledger.started == [0, 1, 2] == ledger.ended


def test_a_stop_raised_while_a_thread_starts_leaves_no_item_running_or_to_come(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stop signal can land inside `Thread.start()` after the thread runs (where a thread pool
    loses track of it): when the call has raised, every item begun has ended, and no other begins."""
    real_start = threading.Thread.start
    calls: list[str] = []

    def start_then_stop(self: threading.Thread) -> None:
        real_start(self)
        calls.append(self.name)
        if len(calls) == 2:
            raise Stop()

    monkeypatch.setattr(threading.Thread, "start", start_then_stop)
    ledger = Ledger()
    with pytest.raises(Stop):
        in_driver_threads(ledger.work, list(range(20_000)), threads=4)
    with ledger.lock:
        begun = list(ledger.started)
        assert sorted(begun) == sorted(ledger.ended)  # nothing under way once the call has raised
    monkeypatch.undo()
    join_workers()  # the threads started, the one the stop cut into as well, have ended
    assert ledger.started == begun  # and none took an item after the call raised
