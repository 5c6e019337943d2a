"""The terms a clean ran under: its topic configs, its `now` and the topics it was to keep. A
promise (`validate --against`) is judged under the same terms."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pipelines.config.job import JobConfig
from segment_io.storage import Location


@dataclass(frozen=True)
class Terms:
    """What a promise is judged under: the topic configs and `now` of the clean, and the topics
    the output was to hold (None: all of SRC's)."""

    config: JobConfig
    now_ms: int
    topics: frozenset[str] | None = None
    origin: str = "flags"  # "flags", "manifest" or "run": said in the run's notes

    def selects(self, topic: str) -> bool:
        return self.topics is None or topic in self.topics


# A clean's validation gate: it judges the staged output (where it is) under the terms of the run
# that wrote it, before publication; an error it raises publishes nothing.
Gate = Callable[[Location, Terms], None]
