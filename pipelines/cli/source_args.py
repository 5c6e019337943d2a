"""What the commands' arguments say of where they read: the option every command that reads a log
takes to read a broker's Kafka remote tier with it, and the object stores the arguments name."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from pipelines.errors import ConfigError

if TYPE_CHECKING:
    from segment_io.kafka_tier.url import KafkaTierSource

KAFKA_TIER_HELP = (
    "{what} is a Kafka broker's log directory (or a copy of its __remote_log_metadata partitions) whose "
    "tiered topics (KIP-405) are read with their remote segments, as the broker serves them: SETTINGS is the "
    "broker's server.properties, or a file with just its remote.*, rlmm.* and rsm.* lines"
)


def add_kafka_tier(p: Any, what: str = "SRC") -> None:
    p.add_argument("--kafka-tier", metavar="SETTINGS", help=KAFKA_TIER_HELP.format(what=what))
    p.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT",
        help="with --kafka-tier: read the remote log metadata from this live cluster (a consumer that "
        f"reads {{}} from its beginning, joins no group and commits nothing) instead of from {what}'s "
        "partitions".replace("{}", "__remote_log_metadata"),
    )
    p.add_argument(
        "--from-bucket",
        action="store_true",
        help="with --kafka-tier: find the remote segments in the storage itself (their objects' names, "
        "manifests and leader-epoch files), not in __remote_log_metadata: the topic rebuilt when its "
        "metadata topic is lost (where it is at hand too, the two are compared and any difference named)",
    )


def add_grace_ms(p: Any) -> None:
    p.add_argument(
        "--grace-ms",
        type=int,
        default=None,
        metavar="MS",
        help="with --kafka-tier --in-place: how long a replaced remote segment stays after its successor is "
        "served, for fetches in flight (default 60000)",
    )


def grace_ms_of(args: argparse.Namespace) -> int | None:
    """The grace period `--grace-ms` gives (None: the default), refused where nothing is swapped."""
    if args.grace_ms is None:
        return None
    if not (args.in_place and args.kafka_tier):
        raise ConfigError("--grace-ms is for --in-place on Kafka's tiered storage (--kafka-tier)")
    if args.grace_ms < 0:
        raise ConfigError(f"--grace-ms {args.grace_ms}: must be 0 or more")
    return int(args.grace_ms)


def kafka_tier_of(args: argparse.Namespace, verify: bool = False) -> KafkaTierSource | None:
    """The Kafka remote tier the command's options name, if any; `verify`: a command that proves
    a log (inspect, validate) has every object of every segment checked, not only those it reads."""
    from segment_io.kafka_tier.url import KafkaTierSource

    if args.kafka_tier is None:
        if args.bootstrap_server is not None or args.from_bucket:
            given = "--bootstrap-server" if args.bootstrap_server is not None else "--from-bucket"
            raise ConfigError(f"{given} says how a Kafka remote tier is read: give --kafka-tier too")
        return None
    if args.from_bucket and args.bootstrap_server is not None:
        raise ConfigError("--from-bucket reads no remote log metadata: leave out --bootstrap-server")
    return KafkaTierSource(args.kafka_tier, args.bootstrap_server, verify, args.from_bucket)


def object_store_urls(args: argparse.Namespace) -> list[str]:
    """The arguments' values that name a place on an object store (a URL of a scheme other than
    `file://`), in the order the parser keeps them."""
    values = [v for v in vars(args).values() for v in (v if isinstance(v, list) else [v])]
    return [v for v in values if isinstance(v, str) and "://" in v and not v.startswith("file://")]
