"""How a broker's log directory read with its Kafka remote tier is named: the operator's
`KafkaTierSource`, and the `kafka-tier:` URL that carries it to every reader (Spark's workers
included) and opens it again."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from segment_io.errors import KafkaTierSettings
from segment_io.kafka_tier.settings import TierSettings
from segment_io.storage import open_storage
from segment_io.storage.log_view import view_params, view_url

SCHEME = "kafka-tier"
ROOT = "kafka-tier:"


@dataclass(frozen=True)
class KafkaTierSource:
    """How a broker's log directory is read with its Kafka remote tier: the broker's tiered-storage
    settings (a properties file), and, to read the remote log metadata from a live cluster rather
    than from the log directory's partitions, the cluster's bootstrap servers."""

    settings: str
    bootstrap: str | None = None
    verify: bool = False  # every object of every segment read and checked (inspect, validate)
    from_bucket: bool = False  # the remote segments from the storage's objects, not the metadata topic


def kafka_tier_url(
    settings: str,
    local: str | None = None,
    metadata: str | None = None,
    bootstrap: str | None = None,
    remote_only: bool = False,
    verify: bool = False,
    from_bucket: bool = False,
) -> str:
    """The URL of a Kafka remote tier: the broker's tiered-storage settings (a properties file),
    its log directory (local segments, checkpoints and, unless `metadata` names another log
    directory or `bootstrap` a live cluster to read it from, the `__remote_log_metadata`
    partitions). `remote_only`: the remote segments alone, no local one (a running broker's,
    which it is writing). `verify`: each segment's index objects verified when it is listed.
    `from_bucket`: the remote segments found in the storage itself (the metadata topic lost)."""
    given = {
        "settings": settings,
        "local": local,
        "metadata": metadata,
        "bootstrap": bootstrap,
        "remote_only": "1" if remote_only else None,
        "verify": "1" if verify else None,
        "from_bucket": "1" if from_bucket else None,
    }
    return view_url(SCHEME, given)


def url_params(url: str) -> dict[str, str]:
    """Inverse of `kafka_tier_url`: its parameters by name."""
    return view_params(SCHEME, url)


def read_settings(settings_url: str) -> TierSettings:
    """The tiered-storage settings in the properties file at `settings_url`."""

    storage, path = open_storage(settings_url)
    try:
        text = storage.read(path).decode("utf-8", errors="replace")
    except (FileNotFoundError, IsADirectoryError):
        raise KafkaTierSettings(f"{settings_url}: no tiered-storage settings file there") from None
    return TierSettings.parse(text, settings_url)


def kafka_tier_sources(url: str) -> list[str]:
    """The places a Kafka tier URL reads (what a destination must stay outside of)."""
    given = url_params(url)
    found = [u for u in (given.get("local"), given.get("metadata")) if u]
    with contextlib.suppress(KafkaTierSettings):  # the run refuses these settings itself, with the reason
        found.append(read_settings(given.get("settings", "")).storage_url)
    return found
