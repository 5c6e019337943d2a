"""Work run in the driver's own threads, which a stop ends whole (segment_io.threads: when the
call returns or raises, no work item runs and none will start)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TypeVar

from segment_io.threads import in_threads

T = TypeVar("T")
R = TypeVar("R")

THREAD_NAME = "segpipe-driver"


def driver_threads() -> int:
    """Threads for work run in the driver: one per core, at most 8."""
    return max(1, min(8, os.cpu_count() or 1))


def in_driver_threads(work: Callable[[T], R], items: Sequence[T], threads: int | None = None) -> list[R]:
    """`work(item)` for every item on up to `threads` (driver_threads()) of the driver's threads,
    the results in item order (segment_io.threads.in_threads)."""
    return in_threads(work, items, threads or driver_threads(), THREAD_NAME)
