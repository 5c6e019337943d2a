"""The wall clock, behind one protocol: every rule that reads the time or waits is given a Clock
(a test gives one that only counts); `SYSTEM_CLOCK` is the real one."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """The wall clock a run reads and waits on."""

    def now_ms(self) -> int: ...

    def sleep_ms(self, ms: int) -> None: ...


class SystemClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def sleep_ms(self, ms: int) -> None:
        time.sleep(max(ms, 0) / 1000)


SYSTEM_CLOCK = SystemClock()
