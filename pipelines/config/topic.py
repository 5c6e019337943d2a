"""Topic configuration by Kafka's own names, types and Kafka 4.x's defaults.

One table (`TOPIC_CONFIGS`) says, for every config segpipe honours, its Kafka name, the field of
`TopicConfig` it sets, its type, its validator and a one-line meaning; defaults live once, on
`TopicConfig`. The parser, `segpipe config describe` and the README's list all read them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from pipelines.errors import ConfigError
from segment_io.format.constants import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    DEFAULT_SEGMENT_BYTES,
    DEFAULT_SEGMENT_INDEX_BYTES,
    LONG_MAX,
    TimestampType,
)


def _policy(value: Any) -> frozenset[str]:
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    policy = frozenset(str(v).strip().lower() for v in items if str(v).strip())
    if not policy or not policy <= {"compact", "delete"}:
        raise ValueError("must be delete, compact or compact,delete")
    return policy


def _long(minimum: int, unit: str = "", unlimited: str = "") -> Callable[[Any], int]:
    """An integer ≥ `minimum` (of `unit`); `unlimited` says what -1 means, where it is allowed."""
    what = f"a number of {unit}" if unit else "an integer"
    rule = f"must be {what}, or -1 ({unlimited})" if unlimited else f"must be {what} ≥ {minimum}"

    def parse(value: Any) -> int:
        text = str(value).strip()
        if isinstance(value, bool) or not text.lstrip("-").isdigit() or int(text) < minimum:
            raise ValueError(rule)
        return int(text)

    return parse


def _between(low: int, high: int) -> Callable[[Any], int]:
    """An integer from `low` to `high`."""

    def parse(value: Any) -> int:
        text = str(value).strip()
        if isinstance(value, bool) or not text.lstrip("-").isdigit() or not low <= int(text) <= high:
            raise ValueError(f"must be an integer from {low} to {high}")
        return int(text)

    return parse


_TIMESTAMP_TYPES = (TimestampType.CREATE_TIME.label, TimestampType.LOG_APPEND_TIME.label)


def _ratio(value: Any) -> float:
    """A number from 0 to 1."""
    try:
        number = float(str(value).strip())
    except ValueError:
        number = -1.0
    if isinstance(value, bool) or not 0.0 <= number <= 1.0:
        raise ValueError("must be a number from 0 to 1")
    return number


def _ts_type(value: Any) -> str:
    text = str(value).strip()
    if text not in _TIMESTAMP_TYPES:
        raise ValueError(f"must be {' or '.join(_TIMESTAMP_TYPES)}")
    return text


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError("must be true or false")


@dataclass(frozen=True)
class ConfigDef:
    """One topic config: its Kafka name, the TopicConfig field, type, validator and meaning."""

    name: str
    attr: str
    type: str
    parse: Callable[[Any], Any]
    doc: str


TOPIC_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        "cleanup.policy",
        "cleanup_policy",
        "list",
        _policy,
        "delete (retention only), compact (compaction; retention by log start offset only) or both",
    ),
    ConfigDef(
        "retention.ms",
        "retention_ms",
        "long ≥ -1",
        _long(-1, "milliseconds", "no time limit"),
        "delete a segment once its largest timestamp is older than this; -1: never by time",
    ),
    ConfigDef(
        "retention.bytes",
        "retention_bytes",
        "long ≥ -1",
        _long(-1, "bytes", "no size limit"),
        "delete the oldest segments while the partition stays at least this large; -1: no limit",
    ),
    ConfigDef(
        "delete.retention.ms",
        "delete_retention_ms",
        "long ≥ 0",
        _long(0, "milliseconds"),
        "how long tombstones and transaction markers stay after their first compaction",
    ),
    ConfigDef(
        "min.compaction.lag.ms",
        "min_compaction_lag_ms",
        "long ≥ 0",
        _long(0, "milliseconds"),
        "records newer than this are not compacted yet",
    ),
    ConfigDef(
        "max.compaction.lag.ms",
        "max_compaction_lag_ms",
        "long ≥ 1",
        _long(1, "milliseconds"),
        "with --select kafka: a partition whose oldest dirty segment is older than this is compacted "
        "whatever its dirty ratio (without it, every partition is compacted)",
    ),
    ConfigDef(
        "min.cleanable.dirty.ratio",
        "min_cleanable_dirty_ratio",
        "0..1",
        _ratio,
        "with --select kafka: a partition is compacted only when its dirty share of the log is above "
        "this (without it, every partition is compacted)",
    ),
    ConfigDef(
        "segment.bytes",
        "segment_bytes",
        "long ≥ 14",
        _long(14, "bytes"),
        "largest output segment: input segments are grouped up to this size",
    ),
    ConfigDef(
        "segment.index.bytes",
        "segment_index_bytes",
        "long ≥ 8",
        _long(8, "bytes"),
        "largest offset or time index of an output segment",
    ),
    ConfigDef(
        "index.interval.bytes",
        "index_interval_bytes",
        "long ≥ 0",
        _long(0, "bytes"),
        "bytes of log between two offset-index entries",
    ),
    ConfigDef(
        "producer.id.expiration.ms",
        "producer_id_expiration_ms",
        "long ≥ 1",
        _long(1, "milliseconds"),
        "a producer idle this long loses the empty batch that keeps its last sequence",
    ),
    ConfigDef(
        "message.timestamp.type",
        "message_timestamp_type",
        "string",
        _ts_type,
        "CreateTime or LogAppendTime (accepted; batches keep the type they were written with)",
    ),
    ConfigDef(
        "compression.gzip.level",
        "gzip_level",
        "int ≥ -1",
        _long(-1),
        "level for gzip batches that compaction rewrites",
    ),
    ConfigDef(
        "compression.lz4.level",
        "lz4_level",
        "int 1..17",
        _between(1, 17),
        "level for lz4 batches that compaction rewrites (9, the default: LZ4's fast compressor, as "
        "Kafka's writer; any other: LZ4 HC at that level)",
    ),
    ConfigDef(
        "compression.zstd.level",
        "zstd_level",
        "int ≥ -131072",
        _long(-131072),
        "level for zstd batches that compaction rewrites",
    ),
    ConfigDef(
        "local.retention.ms",
        "local_retention_ms",
        "long ≥ -2",
        _long(-2, "milliseconds"),
        "tier: local copies of tiered segments older than this are released; -2: retention.ms",
    ),
    ConfigDef(
        "local.retention.bytes",
        "local_retention_bytes",
        "long ≥ -2",
        _long(-2, "bytes"),
        "tier: tiered segments are released locally while the local log stays this large; "
        "-2: retention.bytes",
    ),
    ConfigDef(
        "segpipe.remote.orphan.grace.ms",
        "remote_orphan_grace_ms",
        "long ≥ 0",
        _long(0, "milliseconds"),
        "segpipe's own: tier --expire deletes remote objects no manifest references only this "
        "long after they stopped being referenced (or were written)",
    ),
    ConfigDef(
        "segpipe.last.segment.sealed",
        "last_segment_sealed",
        "boolean",
        _bool,
        "segpipe's own: treat the last segment as inactive (archives from tiered storage or "
        "backups have no active segment), so it is cleaned too",
    ),
)
_BY_NAME = {d.name: d for d in TOPIC_CONFIGS}

# Kafka 4.x topic configs that do not change what cleaning leaves (how a broker writes, replicates,
# flushes, rolls or tiers): accepted,
# so that `kafka-configs --describe` output can be pasted, and ignored with one note.
IGNORED_KAFKA_CONFIGS = frozenset(
    {
        "compression.type",
        "file.delete.delay.ms",
        "flush.messages",
        "flush.ms",
        "follower.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
        "max.message.bytes",
        "message.downconversion.enable",
        "message.format.version",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.difference.max.ms",
        "min.insync.replicas",
        "preallocate",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
        "remote.storage.enable",
        "segment.jitter.ms",
        "segment.ms",
        "unclean.leader.election.enable",
    }
)


@dataclass(frozen=True)
class TopicConfig:
    """One topic's effective configuration; the defaults are Kafka 4.x's."""

    cleanup_policy: frozenset[str] = frozenset({"delete"})
    retention_ms: int = 604_800_000
    retention_bytes: int = -1
    delete_retention_ms: int = 86_400_000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    producer_id_expiration_ms: int = 86_400_000
    message_timestamp_type: str = TimestampType.CREATE_TIME.label
    gzip_level: int = 6
    lz4_level: int = 9
    zstd_level: int = 3
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_orphan_grace_ms: int = 86_400_000
    last_segment_sealed: bool = False

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    def with_values(self, values: Mapping[str, Any], where: str) -> TopicConfig:
        changes = {}
        for name, raw in values.items():
            definition = _BY_NAME.get(name)
            if definition is None:
                known = ", ".join(sorted(_BY_NAME))
                raise ConfigError(f"{where}: unknown topic config {name!r} (known: {known})")
            try:
                changes[definition.attr] = definition.parse(raw)
            except (ValueError, TypeError) as exc:
                raise ConfigError(f"{where}: {name}={raw!r} {exc}") from None
        result = replace(self, **changes)
        if result.max_compaction_lag_ms < result.min_compaction_lag_ms:
            raise ConfigError(f"{where}: max.compaction.lag.ms must be ≥ min.compaction.lag.ms")
        for local, total in (("ms", result.retention_ms), ("bytes", result.retention_bytes)):
            value = getattr(result, f"local_retention_{local}")
            if value >= -1 and total != -1 and (value == -1 or value > total):
                raise ConfigError(f"{where}: local.retention.{local} must not be more than retention.{local}")
        return result

    @property
    def local_retention(self) -> tuple[int, int]:
        """(ms, bytes) by which tiered segments are released locally; -2 follows retention.* (for
        a delete policy; a compact-only topic is released only by explicit local values)."""
        ms, size = self.local_retention_ms, self.local_retention_bytes
        if ms == -2:
            ms = self.retention_ms if self.delete else -1
        if size == -2:
            size = self.retention_bytes if self.delete else -1
        return ms, size

    def to_kafka(self) -> dict[str, Any]:
        """Kafka name → value, as a Kafka topic config would hold it."""
        out: dict[str, Any] = {}
        for d in TOPIC_CONFIGS:
            value = getattr(self, d.attr)
            out[d.name] = ",".join(sorted(value)) if isinstance(value, frozenset) else value
        return out


def describe() -> list[dict[str, Any]]:
    """Every topic config segpipe honours: name, type, default and meaning."""
    defaults = TopicConfig().to_kafka()
    return [
        {"name": d.name, "type": d.type, "default": defaults[d.name], "doc": d.doc} for d in TOPIC_CONFIGS
    ]
