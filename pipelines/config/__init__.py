"""Topic configs by Kafka's names (`topic`) and a job's defaults and per-topic overrides (`job`)."""

from pipelines.config.job import JobConfig, load_job_config
from pipelines.config.topic import IGNORED_KAFKA_CONFIGS, TOPIC_CONFIGS, ConfigDef, TopicConfig, describe
from pipelines.errors import ConfigError

__all__ = [
    "IGNORED_KAFKA_CONFIGS",
    "TOPIC_CONFIGS",
    "ConfigDef",
    "ConfigError",
    "JobConfig",
    "TopicConfig",
    "describe",
    "load_job_config",
]
