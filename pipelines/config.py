"""Typed topic configuration by Kafka's own names and defaults, plus the job options.

Global values and per-topic overrides come from YAML (`conf/*.yaml`) and `--set` /
`--topic-set` flags; unknown names and bad values are refused before any work starts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

import yaml

LONG_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A configuration name or value that segpipe refuses (raised before any work starts)."""


def _policy(value: Any) -> frozenset[str]:
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    policy = frozenset(str(v).strip().lower() for v in items if str(v).strip())
    if not policy or not policy <= {"compact", "delete"}:
        raise ValueError("must be delete, compact or compact,delete")
    return policy


def _long(minimum: int) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError("must be an integer")
        number = int(str(value).strip())
        if number < minimum:
            raise ValueError(f"must be ≥ {minimum}")
        return number

    return parse


def _ts_type(value: Any) -> str:
    text = str(value).strip()
    if text not in ("CreateTime", "LogAppendTime"):
        raise ValueError("must be CreateTime or LogAppendTime")
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


# Kafka topic config name → (field, parser). Defaults are Kafka 4.x's (spec §1).
TOPIC_KEYS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "cleanup.policy": ("cleanup_policy", _policy),
    "retention.ms": ("retention_ms", _long(-1)),
    "retention.bytes": ("retention_bytes", _long(-1)),
    "delete.retention.ms": ("delete_retention_ms", _long(0)),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _long(0)),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", _long(1)),
    "segment.bytes": ("segment_bytes", _long(14)),
    "segment.index.bytes": ("segment_index_bytes", _long(8)),
    "index.interval.bytes": ("index_interval_bytes", _long(0)),
    "producer.id.expiration.ms": ("producer_id_expiration_ms", _long(1)),
    "message.timestamp.type": ("message_timestamp_type", _ts_type),
    "compression.gzip.level": ("gzip_level", _long(-1)),
    "compression.lz4.level": ("lz4_level", _long(0)),
    "compression.zstd.level": ("zstd_level", _long(-131072)),
    # segpipe's own: archives copied from tiered storage or backups have no active segment.
    "segpipe.last.segment.sealed": ("last_segment_sealed", _bool),
}


@dataclass(frozen=True)
class TopicConfig:
    """One topic's effective configuration (Kafka names in TOPIC_KEYS, Kafka 4.x defaults)."""

    cleanup_policy: frozenset[str] = frozenset({"delete"})
    retention_ms: int = 604_800_000
    retention_bytes: int = -1
    delete_retention_ms: int = 86_400_000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    segment_bytes: int = 1_073_741_824
    segment_index_bytes: int = 10_485_760
    index_interval_bytes: int = 4096
    producer_id_expiration_ms: int = 86_400_000
    message_timestamp_type: str = "CreateTime"
    gzip_level: int = 6
    lz4_level: int = 0
    zstd_level: int = 3
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
            if name not in TOPIC_KEYS:
                known = ", ".join(sorted(TOPIC_KEYS))
                raise ConfigError(f"{where}: unknown topic config {name!r} (known: {known})")
            attr, parse = TOPIC_KEYS[name]
            try:
                changes[attr] = parse(raw)
            except (ValueError, TypeError) as exc:
                raise ConfigError(f"{where}: {name}={raw!r} {exc}") from None
        result = replace(self, **changes)
        if result.max_compaction_lag_ms < result.min_compaction_lag_ms:
            raise ConfigError(f"{where}: max.compaction.lag.ms must be ≥ min.compaction.lag.ms")
        return result

    def to_kafka(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, (attr, _) in TOPIC_KEYS.items():
            value = getattr(self, attr)
            out[name] = ",".join(sorted(value)) if isinstance(value, frozenset) else value
        return out


@dataclass(frozen=True)
class JobConfig:
    """Defaults for every topic plus per-topic overrides."""

    defaults: TopicConfig = field(default_factory=TopicConfig)
    topics: Mapping[str, TopicConfig] = field(default_factory=dict)

    def for_topic(self, topic: str) -> TopicConfig:
        return self.topics.get(topic, self.defaults)

    @classmethod
    def build(
        cls,
        defaults: Mapping[str, Any] | None = None,
        topics: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> JobConfig:
        base = TopicConfig().with_values(defaults or {}, "defaults")
        per_topic = {t: base.with_values(v or {}, f"topic {t}") for t, v in (topics or {}).items()}
        return cls(base, per_topic)

    @classmethod
    def from_sources(
        cls,
        yaml_text: str | None = None,
        sets: list[str] | None = None,
        topic_sets: list[str] | None = None,
    ) -> JobConfig:
        """YAML (`defaults:` and `topics:` maps), then `NAME=VALUE` and `TOPIC:NAME=VALUE` flags."""
        doc: dict[str, Any] = {}
        if yaml_text:
            loaded = yaml.safe_load(yaml_text) or {}
            if not isinstance(loaded, dict) or set(loaded) - {"defaults", "topics"}:
                raise ConfigError("config file must be a map with 'defaults' and/or 'topics'")
            doc = loaded
        defaults = dict(doc.get("defaults") or {})
        topics = {str(k): dict(v or {}) for k, v in (doc.get("topics") or {}).items()}
        for item in sets or []:
            name, value = _split(item, "--set")
            defaults[name] = value
        for item in topic_sets or []:
            topic, sep, rest = item.partition(":")
            if not sep or not topic:
                raise ConfigError(f"--topic-set {item!r}: expected TOPIC:NAME=VALUE")
            name, value = _split(rest, "--topic-set")
            topics.setdefault(topic, {})[name] = value
        return cls.build(defaults, topics)


def _split(item: str, flag: str) -> tuple[str, str]:
    name, sep, value = item.partition("=")
    if not sep or not name.strip():
        raise ConfigError(f"{flag} {item!r}: expected NAME=VALUE")
    return name.strip(), value.strip()


def describe_defaults() -> dict[str, Any]:
    """Every supported name with its default, for documentation and `--help`."""
    return TopicConfig().to_kafka()


__all__ = ["TOPIC_KEYS", "ConfigError", "JobConfig", "TopicConfig", "describe_defaults", "fields"]
