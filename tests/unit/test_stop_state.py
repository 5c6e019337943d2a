"""A stop belongs to the run under way, not to the process: a signal during a publication is held
until the publication is done and then stops the run; a signal after a publication still stops it
(the process's later steps, its report); a new run starts with no stop."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from pipelines.errors import Terminated
from pipelines.runtime import stop
from pipelines.runtime.session import LazySpark
from pipelines.runtime.stop import interrupt_cancels_jobs, published, publishing

pytestmark = pytest.mark.unit


@pytest.fixture
def handled() -> Iterator[None]:
    """The run's stop handlers installed (no Spark: nothing to cancel), the defaults put back."""
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    interrupt_cancels_jobs(LazySpark(lambda: None))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])
        stop.begin_run()


def test_a_stop_during_a_publication_is_held_until_it_is_done(handled: None) -> None:
    finished = []
    with pytest.raises(Terminated), publishing("dst"):
        os.kill(os.getpid(), signal.SIGTERM)
        finished.append("the rename")  # the publication runs to its end
    assert finished == ["the rename"] and published() == ["dst"]


def test_a_stop_after_one_publication_still_stops_the_run(handled: None) -> None:
    with publishing("first step's output"):
        pass
    with pytest.raises(KeyboardInterrupt) as stopped:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # the handler runs at the next bytecode boundary
            pass
    assert not isinstance(stopped.value, Terminated)
    assert stop.stopped_by() == signal.SIGINT
    # The next publication of a stopped run does not begin.
    with pytest.raises(KeyboardInterrupt), publishing("second step's output"):
        raise AssertionError("a stopped run published")
    assert published() == ["first step's output"]


def test_a_new_run_starts_with_no_stop(handled: None) -> None:
    with pytest.raises(Terminated), publishing("a"):
        os.kill(os.getpid(), signal.SIGTERM)
    stop.begin_run()
    assert stop.stopped_by() is None and published() == []
    with publishing("b"):
        pass
    assert published() == ["b"]
