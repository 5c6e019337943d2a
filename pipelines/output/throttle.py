"""`--max-bytes-per-second`: a run's upload rate, shared evenly by its concurrent tasks."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field


@dataclass
class Throttle:
    """Passes chunks on no faster than `bytes_per_second` on average since the first one (the
    clock and the sleep are injected so that the rule is testable without waiting)."""

    bytes_per_second: float
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _start: float | None = field(default=None, init=False)
    _sent: int = field(default=0, init=False)

    def __call__(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            if self._start is None:
                self._start = self.clock()
            due = self._start + self._sent / self.bytes_per_second
            wait = due - self.clock()
            if wait > 0:
                self.sleep(wait)
            self._sent += len(chunk)
            yield chunk


def per_task(bytes_per_second: int | None, concurrent_tasks: int) -> float | None:
    """Each task's share of the run's rate (None: unbounded)."""
    if bytes_per_second is None:
        return None
    return bytes_per_second / max(1, concurrent_tasks)
