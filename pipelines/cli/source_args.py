"""The option every command that reads a log takes to read a broker's Kafka remote tier with it."""

from __future__ import annotations

from typing import Any

KAFKA_TIER_HELP = (
    "{what} is a Kafka broker's log directory (or a copy of its __remote_log_metadata partitions) whose "
    "tiered topics (KIP-405) are read with their remote segments, as the broker serves them: SETTINGS is the "
    "broker's server.properties, or a file with just its remote.*, rlmm.* and rsm.* lines"
)


def add_kafka_tier(p: Any, what: str = "SRC") -> None:
    p.add_argument("--kafka-tier", metavar="SETTINGS", help=KAFKA_TIER_HELP.format(what=what))
