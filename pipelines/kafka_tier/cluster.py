"""The live cluster a swap talks to (kafka-python, `pip install segpipe[kafka]`): records sent to
the remote log metadata topic as the broker's own metadata manager sends them (no key, the
partition Kafka's partitioner picks, acknowledged by every in-sync replica, one in flight so they
land in order), the metadata read back, and what the cluster says of a partition's leader and
topic configs. Every call is bounded in time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from segment_io.errors import KafkaTierPublishFailed, KafkaTierSettings
from segment_io.kafka_tier.metadata import MetadataRecord, TopicIdPartition, encode_metadata_record
from segment_io.kafka_tier.metadata_cache import MetadataReplay
from segment_io.kafka_tier.metadata_live import read_metadata_live
from segment_io.kafka_tier.metadata_partition import metadata_partition
from segment_io.kafka_tier.settings import METADATA_TOPIC

SEND_TIMEOUT_S = 60.0


def _kafka() -> Any:
    try:
        import kafka
    except ImportError:
        raise KafkaTierSettings(
            "changing a Kafka remote tier on a live cluster (--bootstrap-server) needs kafka-python: "
            "pip install 'segpipe[kafka]'"
        ) from None
    return kafka


class LiveCluster:
    """One cluster, reached through `bootstrap`; close() when done."""

    def __init__(self, bootstrap: str) -> None:
        kafka = _kafka()
        from kafka.errors import KafkaError

        self.bootstrap = bootstrap
        try:
            self._admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
            self._producer = kafka.KafkaProducer(
                bootstrap_servers=bootstrap,
                acks="all",
                max_in_flight_requests_per_connection=1,
                retries=5,
                request_timeout_ms=30_000,
            )
            partitions = self._producer.partitions_for(METADATA_TOPIC)
        except KafkaError as exc:
            raise KafkaTierSettings(f"{bootstrap}: cannot reach the cluster: {exc}") from None
        if not partitions:
            raise KafkaTierSettings(
                f"{bootstrap}: the cluster has no {METADATA_TOPIC} topic (no tiered storage)"
            )
        self.metadata_partitions = len(partitions)

    def close(self) -> None:
        self._producer.close(timeout=SEND_TIMEOUT_S)
        self._admin.close()

    def publish(self, record: MetadataRecord) -> None:
        from kafka.errors import KafkaError

        partition = metadata_partition(record.tp, self.metadata_partitions)
        try:
            future = self._producer.send(
                METADATA_TOPIC, value=encode_metadata_record(record), partition=partition
            )
            future.get(timeout=SEND_TIMEOUT_S)
        except KafkaError as exc:
            raise KafkaTierPublishFailed(
                f"{self.bootstrap}: a record to {METADATA_TOPIC}-{partition} was not acknowledged ({exc}); "
                "the swaps under way are journalled: run again to finish or undo them"
            ) from None

    def replay(self) -> MetadataReplay:
        return MetadataReplay.of(read_metadata_live(self.bootstrap))

    def _ask(self, what: str, call: Callable[[], Any]) -> Any:
        """An admin request; a cluster that does not answer is a typed error, not a traceback."""
        from kafka.errors import KafkaError

        try:
            return call()
        except KafkaError as exc:
            raise KafkaTierPublishFailed(
                f"{self.bootstrap}: {what} failed ({exc}); the swaps under way are journalled: run again "
                "to finish or undo them"
            ) from None

    def leader_epoch(self, tp: TopicIdPartition) -> int | None:
        topics = self._ask(
            f"reading {tp.topic}'s leader epochs", lambda: self._admin.describe_topics([tp.topic])
        )
        for topic in topics:
            for p in topic.get("partitions", ()):
                if p.get("partition_index", p.get("partition")) == tp.partition:
                    epoch = p.get("leader_epoch")
                    return None if epoch is None or epoch < 0 else int(epoch)
        return None

    def topic_config(self, topic: str, name: str) -> str | None:
        """The topic's effective value of config `name` (its own, or the broker's default)."""
        from kafka.admin import ConfigResource, ConfigResourceType

        resource = ConfigResource(ConfigResourceType.TOPIC, topic)
        found = self._ask(
            f"reading {topic}'s configs",
            lambda: self._admin.describe_configs([resource], config_filter="all"),
        )
        return _config_value(found, topic, name)


def _config_value(found: Any, topic: str, name: str) -> str | None:
    """The value of `name` in a describe_configs answer, whatever shape this kafka-python gives."""
    if isinstance(found, dict):
        for by_name in found.values():
            configs = by_name.get(topic, {}) if isinstance(by_name, dict) else {}
            entry = configs.get(name)
            if isinstance(entry, dict):
                return None if entry.get("value") is None else str(entry.get("value"))
            if entry is not None:
                return str(entry)
    return None
