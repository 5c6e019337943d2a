"""The `__remote_log_metadata` topic read from a live cluster: a consumer that joins no group and
commits nothing reads every partition from its beginning to the end it had when the read began,
in offset order (what a broker replays at start-up). Needs kafka-python (`pip install
segpipe[kafka]`)."""

from __future__ import annotations

import time
from collections.abc import Iterator

from segment_io.errors import KafkaTierSettings
from segment_io.kafka_tier.metadata import MetadataRecord, decode_metadata_record
from segment_io.kafka_tier.settings import METADATA_TOPIC

READ_TIMEOUT_S = 120.0  # the whole read; a cluster that stops answering is an error, not a wait


def read_metadata_live(bootstrap: str, timeout_s: float = READ_TIMEOUT_S) -> Iterator[MetadataRecord]:
    try:
        from kafka import KafkaConsumer, TopicPartition
    except ImportError:
        raise KafkaTierSettings(
            "reading the remote log metadata from a live cluster (--bootstrap-server) needs kafka-python: "
            "pip install 'segpipe[kafka]' (or give the broker's log directory instead)"
        ) from None
    from kafka.errors import KafkaError

    try:
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            group_id=None,
            auto_offset_reset="earliest",
            request_timeout_ms=30_000,
        )
    except KafkaError as exc:
        raise KafkaTierSettings(f"{bootstrap}: cannot reach the cluster: {exc}") from None
    try:
        partitions = consumer.partitions_for_topic(METADATA_TOPIC)
        if not partitions:
            raise KafkaTierSettings(
                f"{bootstrap}: the cluster has no {METADATA_TOPIC} topic (no tiered storage)"
            )
        tps = [TopicPartition(METADATA_TOPIC, p) for p in sorted(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        got: dict[int, list[tuple[int, bytes]]] = {tp.partition: [] for tp in tps}
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise KafkaTierSettings(
                    f"{bootstrap}: {METADATA_TOPIC} was not read to its end in {timeout_s:.0f} s"
                )
            for tp, messages in consumer.poll(timeout_ms=1000).items():
                got[tp.partition] += [
                    (m.offset, m.value) for m in messages if m.offset < ends[tp] and m.value
                ]
    except KafkaError as exc:
        raise KafkaTierSettings(f"{bootstrap}: reading {METADATA_TOPIC} failed: {exc}") from None
    finally:
        consumer.close()
    for partition, values in sorted(got.items()):
        for offset, value in values:
            yield decode_metadata_record(value, f"{bootstrap}/{METADATA_TOPIC}-{partition} (offset {offset})")
