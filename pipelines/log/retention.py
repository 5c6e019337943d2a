"""Segment deletion by Kafka's retention rules, on segment metadata only
(docs/cleaning-rules.md#retention)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pipelines.clock import iso
from pipelines.config.topic import TopicConfig
from segment_io.topic_partition import TopicPartition

Predicate = Callable[[int, int, bool], bool]  # (position among survivors, segment index, is last)


@dataclass(frozen=True)
class RetentionSegment:
    base_offset: int
    size: int
    largest_timestamp: int  # last time-index entry, else the .log mtime


@dataclass(frozen=True)
class RetentionResult:
    deleted: tuple[tuple[int, str], ...]  # (index into the segment list, rule)
    log_start_offset: int
    roll_empty_at: int | None  # every segment went: Kafka rolls an empty one at the log end


def apply_retention(
    segments: list[RetentionSegment],
    log_end_offset: int,
    high_watermark: int,
    log_start_offset: int,
    config: TopicConfig,
    now_ms: int,
) -> RetentionResult:
    """Kafka 3.0+ order: log-start-offset breach, then size, then time; each rule deletes a
    contiguous prefix and stops at the first segment it may not delete. Partitions without
    `delete` in their policy get the log-start-offset rule only."""
    alive = list(range(len(segments)))
    deleted: list[tuple[int, str]] = []

    def run(rule: str, predicate_factory: Callable[[], Predicate]) -> None:
        nonlocal alive
        predicate = predicate_factory()
        keep_from = 0
        for k, i in enumerate(alive):
            upper = segments[alive[k + 1]].base_offset if k + 1 < len(alive) else log_end_offset
            last = k + 1 == len(alive)
            seg = segments[i]
            if high_watermark < upper or (last and seg.size == 0) or not predicate(k, i, last):
                break
            deleted.append((i, rule))
            keep_from = k + 1
        alive = alive[keep_from:]

    def start_offset_rule() -> Predicate:
        return lambda k, i, last: not last and segments[alive[k + 1]].base_offset <= log_start_offset

    def size_rule() -> Predicate:
        total = sum(segments[i].size for i in alive)
        if config.retention_bytes < 0 or total < config.retention_bytes:
            return lambda k, i, last: False
        excess = [total - config.retention_bytes]

        def predicate(k: int, i: int, last: bool) -> bool:
            if excess[0] - segments[i].size >= 0:
                excess[0] -= segments[i].size
                return True
            return False

        return predicate

    def time_rule() -> Predicate:
        if config.retention_ms < 0:
            return lambda k, i, last: False
        return lambda k, i, last: now_ms - segments[i].largest_timestamp > config.retention_ms

    run("log_start_offset", start_offset_rule)
    if config.delete:
        run("retention_bytes", size_rule)
        run("retention_ms", time_rule)
    roll_at = None
    if segments and not alive:
        roll_at = log_end_offset
        new_start = log_end_offset
    else:
        new_start = segments[alive[0]].base_offset if alive else log_start_offset
    return RetentionResult(tuple(deleted), max(log_start_offset, new_start), roll_at)


def emptied_warning(tp: TopicPartition, rules: set[str], newest_ms: int, now_ms: int) -> str:
    """What an operator must read when retention removes every segment of a partition."""
    return (
        f"retention removed every segment of {tp} (by {', '.join(sorted(rules))}): its newest "
        f"timestamp is {iso(newest_ms)} ({newest_ms}), now is {iso(now_ms)} ({now_ms}); "
        "pass --now to apply the rules at another time"
    )
