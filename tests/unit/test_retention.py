"""Retention on segment metadata alone, one rule per test (docs/cleaning-rules.md#retention)."""

from __future__ import annotations

import pytest

from pipelines.config import JobConfig, TopicConfig
from pipelines.log.retention import RetentionSegment, apply_retention

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000
DAY = 86_400_000


def config(**values: object) -> TopicConfig:
    return JobConfig.build(values).defaults


def segments(*specs: tuple[int, int, int]) -> list[RetentionSegment]:
    """(base offset, size, largest timestamp) per segment, oldest first."""
    return [RetentionSegment(base, size, ts) for base, size, ts in specs]


def test_time_rule_deletes_the_expired_prefix_only() -> None:
    # Segment 1 is expired but follows a fresh segment 0: retention removes a prefix, so nothing goes.
    log = segments((0, 100, NOW - 1 * DAY), (10, 100, NOW - 9 * DAY), (20, 100, NOW))
    result = apply_retention(log, 30, 30, 0, config(), NOW)
    assert result.deleted == () and result.log_start_offset == 0
    # Two old segments, then fresh ones: the two go, and the log start offset rises to the third.
    log = segments((0, 100, NOW - 9 * DAY), (10, 100, NOW - 8 * DAY), (20, 100, NOW - DAY), (30, 100, NOW))
    result = apply_retention(log, 40, 40, 0, config(), NOW)
    assert result.deleted == ((0, "retention_ms"), (1, "retention_ms"))
    assert result.log_start_offset == 20 and result.roll_empty_at is None


def test_time_rule_is_strict_and_a_future_segment_blocks_newer_ones() -> None:
    retention = 7 * DAY
    # Exactly retention.ms old is kept (now − largest > retention.ms is required).
    log = segments((0, 100, NOW - retention), (10, 100, NOW))
    assert apply_retention(log, 20, 20, 0, config(), NOW).deleted == ()
    # A segment stamped in the future is never deleted and protects every segment after it.
    log = segments((0, 100, NOW + DAY), (10, 100, NOW - 30 * DAY), (20, 100, NOW))
    assert apply_retention(log, 30, 30, 0, config(), NOW).deleted == ()


def test_size_rule_deletes_while_the_excess_covers_the_segment() -> None:
    # 4 × 100 bytes with retention.bytes = 250: excess 150 covers the first segment only.
    log = segments(*((base, 100, NOW) for base in (0, 10, 20, 30)))
    result = apply_retention(log, 40, 40, 0, config(**{"retention.bytes": 250}), NOW)
    assert result.deleted == ((0, "retention_bytes"),) and result.log_start_offset == 10
    # Below the limit nothing goes, even when every segment is old by size standards.
    result = apply_retention(log, 40, 40, 0, config(**{"retention.bytes": 400}), NOW)
    assert result.deleted == ()


def test_log_start_offset_rule_deletes_segments_wholly_below_it() -> None:
    # Log start 25 lies inside segment 2: segments 0 and 1 lie wholly below it and go.
    log = segments((0, 100, NOW), (10, 100, NOW), (20, 100, NOW), (30, 100, NOW))
    result = apply_retention(log, 40, 40, 25, config(**{"retention.ms": -1}), NOW)
    assert result.deleted == ((0, "log_start_offset"), (1, "log_start_offset"))
    assert result.log_start_offset == 25  # never lowered to the first remaining base


def test_compact_only_partitions_get_the_log_start_offset_rule_only() -> None:
    log = segments((0, 100, NOW - 30 * DAY), (10, 100, NOW - 30 * DAY), (20, 100, NOW))
    compact = config(**{"cleanup.policy": "compact", "retention.bytes": 1})
    assert apply_retention(log, 30, 30, 0, compact, NOW).deleted == ()
    assert apply_retention(log, 30, 30, 10, compact, NOW).deleted == ((0, "log_start_offset"),)


def test_rules_run_in_kafka_order_start_offset_then_size_then_time() -> None:
    # Segment 0 is below the log start; of the 300 bytes left, 150 are over retention.bytes, which
    # covers segment 1 only (each rule sees what the one before left); segment 2 is expired.
    log = segments((0, 100, NOW), (10, 100, NOW), (20, 100, NOW - 30 * DAY), (30, 100, NOW))
    result = apply_retention(log, 40, 40, 10, config(**{"retention.bytes": 150}), NOW)
    assert result.deleted == ((0, "log_start_offset"), (1, "retention_bytes"), (2, "retention_ms"))
    assert result.log_start_offset == 30


def test_nothing_at_or_above_the_high_watermark_is_deleted() -> None:
    # Every segment is expired, but the high watermark (15) lies inside segment 1.
    log = segments((0, 100, NOW - 30 * DAY), (10, 100, NOW - 30 * DAY), (20, 100, NOW - 30 * DAY))
    result = apply_retention(log, 30, 15, 0, config(), NOW)
    assert result.deleted == ((0, "retention_ms"),)


def test_when_every_segment_goes_an_empty_segment_is_rolled_at_the_log_end() -> None:
    log = segments((0, 100, NOW - 30 * DAY), (10, 100, NOW - 30 * DAY))
    result = apply_retention(log, 20, 20, 0, config(), NOW)
    assert [i for i, _ in result.deleted] == [0, 1]
    assert result.roll_empty_at == 20 and result.log_start_offset == 20


def test_an_empty_last_segment_is_never_deleted() -> None:
    # What a previous pass rolled stays: the log is never left without a segment.
    log = segments((0, 100, NOW - 30 * DAY), (20, 0, NOW - 30 * DAY))
    result = apply_retention(log, 20, 20, 0, config(), NOW)
    assert result.deleted == ((0, "retention_ms"),) and result.roll_empty_at is None
    assert result.log_start_offset == 20
