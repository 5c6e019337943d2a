"""A job's topic configs: defaults for every topic plus per-topic overrides, from YAML
(`defaults:` and `topics:` maps) and `--set NAME=VALUE` / `--topic-set TOPIC:NAME=VALUE` flags,
later sources winning. Unknown names and bad values are refused before any work starts; Kafka's
configs that do not bear on cleaning are accepted and ignored. Where each value came from is kept
(`segpipe clean --print-config`, the manifest)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from pipelines.config.topic import IGNORED_KAFKA_CONFIGS, TOPIC_CONFIGS, TopicConfig
from pipelines.errors import ConfigError
from segment_io.storage import open_storage

DEFAULT = "default"
GIVEN = "given"  # the source of a value passed to JobConfig.build in code
# A value and where it came from, by config name.
Sourced = dict[str, tuple[Any, str]]


@dataclass(frozen=True)
class JobConfig:
    """Defaults for every topic plus per-topic overrides."""

    defaults: TopicConfig = field(default_factory=TopicConfig)
    topics: Mapping[str, TopicConfig] = field(default_factory=dict)
    # Config name -> source, for the defaults ("*") and each configured topic.
    sources: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    ignored: frozenset[str] = frozenset()  # Kafka configs accepted that do not bear on cleaning

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

    def effective(self, topic: str) -> Sourced:
        """Every config of `topic`, Kafka name -> (value, where it came from)."""
        values = self.for_topic(topic).to_kafka()
        sources = {**self.sources.get("*", {}), **self.sources.get(topic, {})}
        return {d.name: (values[d.name], sources.get(d.name, DEFAULT)) for d in TOPIC_CONFIGS}

    def describe(self, topics: list[str]) -> dict[str, dict[str, dict[str, Any]]]:
        """The effective configs of `topics`, JSON-able: topic -> name -> value and source."""
        return {
            t: {n: {"value": v, "source": src} for n, (v, src) in self.effective(t).items()} for t in topics
        }

    def all_sealed(self, why: str) -> JobConfig:
        """Every topic's last segment counts as inactive (`why` is recorded as the value's source):
        a remote tier holds no active segment."""
        name = "segpipe.last.segment.sealed"
        sources = {key: {**values, name: why} for key, values in self.sources.items()}
        sources["*"] = {**sources.get("*", {}), name: why}
        return replace(
            self,
            defaults=replace(self.defaults, last_segment_sealed=True),
            topics={t: replace(c, last_segment_sealed=True) for t, c in self.topics.items()},
            sources=sources,
        )

    def each_segment_alone(self, why: str) -> JobConfig:
        """Every segment a group of its own (`segment.bytes` 1: no neighbour joins a group), so each
        cleaned segment keeps its input's offsets: what replaces a served remote segment must.
        `why` is recorded as the value's source."""
        name = "segment.bytes"
        sources = {key: {**values, name: why} for key, values in self.sources.items()}
        sources["*"] = {**sources.get("*", {}), name: why}
        return replace(
            self,
            defaults=replace(self.defaults, segment_bytes=1),
            topics={t: replace(c, segment_bytes=1) for t, c in self.topics.items()},
            sources=sources,
        )

    def only(self, policy: str, why: str) -> JobConfig:
        """Each topic with only the `policy` half of its cleanup.policy (`delete`: retention,
        `compact`: compaction), for a run that applies one of the two; a topic left with neither
        is carried over whole (delete with no time or size limit: only what lies below the log
        start offset goes, which Kafka itself no longer serves). `why` is recorded as the source."""

        def cut(c: TopicConfig) -> TopicConfig:
            kept = c.cleanup_policy & {policy}
            if kept:
                return replace(c, cleanup_policy=kept)
            return replace(c, cleanup_policy=frozenset({"delete"}), retention_ms=-1, retention_bytes=-1)

        names = ("cleanup.policy", "retention.ms", "retention.bytes")
        sources = {key: {**values, **dict.fromkeys(names, why)} for key, values in self.sources.items()}
        sources["*"] = {**sources.get("*", {}), **dict.fromkeys(names, why)}
        return replace(
            self,
            defaults=cut(self.defaults),
            topics={t: cut(c) for t, c in self.topics.items()},
            sources=sources,
        )

    def ignored_note(self) -> str | None:
        if not self.ignored:
            return None
        names = ", ".join(sorted(self.ignored))
        return f"segpipe: note: Kafka topic configs that do not bear on cleaning are ignored: {names}"

    @classmethod
    def build(
        cls,
        defaults: Mapping[str, Any] | None = None,
        topics: Mapping[str, Mapping[str, Any]] | None = None,
        sources: Mapping[str, Mapping[str, str]] | None = None,
    ) -> JobConfig:
        ignored = {
            n
            for v in [defaults or {}, *(topics or {}).values()]
            for n in (v or {})
            if n in IGNORED_KAFKA_CONFIGS
        }
        base = TopicConfig().with_values(_kept(defaults), "defaults")
        per_topic = {t: base.with_values(_kept(v), f"topic {t}") for t, v in (topics or {}).items()}
        if sources is None:  # values given in code: their source is the caller
            sources = {"*": dict.fromkeys(defaults or {}, GIVEN)}
            sources.update({t: dict.fromkeys(v or {}, GIVEN) for t, v in (topics or {}).items()})
        return cls(base, per_topic, dict(sources), frozenset(ignored))

    @classmethod
    def from_description(cls, described: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> JobConfig:
        """The configs `describe` recorded (a manifest's `configs`), each value with its source;
        topics it does not name keep the defaults."""
        topics = {t: {n: item["value"] for n, item in values.items()} for t, values in described.items()}
        sources = {
            t: {n: str(item["source"]) for n, item in values.items()} for t, values in described.items()
        }
        return cls.build(None, topics, sources)

    @classmethod
    def from_sources(
        cls,
        yaml_text: str | None = None,
        sets: list[str] | None = None,
        topic_sets: list[str] | None = None,
        yaml_name: str = "config file",
    ) -> JobConfig:
        """YAML (`defaults:` and `topics:` maps), then `NAME=VALUE` and `TOPIC:NAME=VALUE` flags."""
        doc = _yaml_doc(yaml_text, yaml_name) if yaml_text else {}
        defaults = dict(doc.get("defaults") or {})
        topics = {str(k): dict(v or {}) for k, v in (doc.get("topics") or {}).items()}
        sources: dict[str, dict[str, str]] = {"*": {n: f"{yaml_name} defaults" for n in defaults}}
        for t, values in topics.items():
            sources[t] = {n: f"{yaml_name} topics.{t}" for n in values}
        for item in sets or []:
            name, value = _split(item, "--set")
            defaults[name] = value
            sources["*"][name] = "--set"
        for item in topic_sets or []:
            topic, sep, rest = item.partition(":")
            if not sep or not topic:
                raise ConfigError(f"--topic-set {item!r}: expected TOPIC:NAME=VALUE")
            name, value = _split(rest, "--topic-set")
            topics.setdefault(topic, {})[name] = value
            sources.setdefault(topic, {})[name] = "--topic-set"
        return cls.build(defaults, topics, sources)


def _kept(values: Mapping[str, Any] | None) -> dict[str, Any]:
    return {n: v for n, v in (values or {}).items() if n not in IGNORED_KAFKA_CONFIGS}


def _yaml_doc(text: str, name: str) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{name} is not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{name} must be a map with 'defaults:' and/or 'topics:'")
    unknown = sorted(str(k) for k in set(loaded) - {"defaults", "topics"})
    if unknown:
        raise ConfigError(f"{name}: unknown key {', '.join(unknown)} (the keys are 'defaults' and 'topics')")
    for key in ("defaults", "topics"):
        if loaded.get(key) is not None and not isinstance(loaded[key], dict):
            raise ConfigError(f"{name}: '{key}' must be a map")
    for topic, values in (loaded.get("topics") or {}).items():
        if values is not None and not isinstance(values, dict):
            raise ConfigError(f"{name}: topics.{topic} must be a map of topic configs")
    return loaded


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
    return JobConfig.from_sources(text, sets, topic_sets, yaml_name=config_url or "config file")


def _split(item: str, flag: str) -> tuple[str, str]:
    name, sep, value = item.partition("=")
    if not sep or not name.strip():
        raise ConfigError(f"{flag} {item!r}: expected NAME=VALUE")
    return name.strip(), value.strip()
