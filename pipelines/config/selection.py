"""Which topics a run keeps: names or shell-style globs (`orders`, `cdc.*`); none means all."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass


@dataclass(frozen=True)
class TopicSelection:
    patterns: tuple[str, ...] = ()

    def __call__(self, topic: str) -> bool:
        return not self.patterns or any(fnmatch.fnmatchcase(topic, p) for p in self.patterns)

    @property
    def everything(self) -> bool:
        return not self.patterns

    def unmatched(self, topics: set[str]) -> list[str]:
        """Patterns that match none of `topics` (most likely misspelt)."""
        return [p for p in self.patterns if not any(fnmatch.fnmatchcase(t, p) for t in topics)]
