"""A job's topic configs: defaults for every topic plus per-topic overrides, from YAML
(`defaults:` and `topics:` maps) and `--set NAME=VALUE` / `--topic-set TOPIC:NAME=VALUE` flags.
Unknown names and bad values are refused before any work starts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from pipelines.config.topic import TopicConfig
from pipelines.errors import ConfigError
from segment_io.storage import open_storage


@dataclass(frozen=True)
class JobConfig:
    """Defaults for every topic plus per-topic overrides."""

    defaults: TopicConfig = field(default_factory=TopicConfig)
    topics: Mapping[str, TopicConfig] = field(default_factory=dict)

    def for_topic(self, topic: str) -> TopicConfig:
        return self.topics.get(topic, self.defaults)

    def require_topics(self, present: set[str], where: str) -> None:
        """Refuse per-topic configs for topics that `where` does not hold (a misspelt name would
        otherwise leave the real topic on the defaults)."""
        unknown = sorted(set(self.topics) - present)
        if unknown:
            there = ", ".join(sorted(present)) or "none"
            raise ConfigError(
                f"topic configs for {', '.join(unknown)}, which {where} does not hold (topics there: {there})"
            )

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
            try:
                loaded = yaml.safe_load(yaml_text) or {}
            except yaml.YAMLError as exc:
                raise ConfigError(f"config file is not valid YAML: {exc}") from None
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


def load_job_config(
    config_url: str | None, sets: list[str] | None = None, topic_sets: list[str] | None = None
) -> JobConfig:
    """A job's configs from an optional YAML file (path or URL) and the command line's flags."""
    text = None
    if config_url:
        storage, path = open_storage(config_url)
        try:
            text = storage.read(path).decode()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read config file {config_url}: {exc}") from None
    return JobConfig.from_sources(text, sets, topic_sets)


def _split(item: str, flag: str) -> tuple[str, str]:
    name, sep, value = item.partition("=")
    if not sep or not name.strip():
        raise ConfigError(f"{flag} {item!r}: expected NAME=VALUE")
    return name.strip(), value.strip()
