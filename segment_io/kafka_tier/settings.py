"""A broker's tiered-storage settings, read from its own properties file (the whole
`server.properties`, or just its `remote.*`, `rlmm.*` and `rsm.*` lines): which plugin wrote the
remote tier, where its objects are, how they are named, chunked and encrypted.

`TIER_SETTINGS` is the one table of the settings segpipe reads (Kafka's and the plugins' names,
their defaults, what they mean); the README's list is made from it.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from segment_io.errors import KafkaTierSettings
from segment_io.kafka_tier.backends import (
    AIVEN_AZURE,
    AIVEN_FILESYSTEM,
    AIVEN_GCS,
    AIVEN_S3,
    AZURE,
    backend_place,
)

AIVEN_RSM = "io.aiven.kafka.tieredstorage.RemoteStorageManager"
LOCAL_TIERED_STORAGE = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"
METADATA_TOPIC = "__remote_log_metadata"


@dataclass(frozen=True)
class TierSetting:
    name: str
    default: str | None
    doc: str


TIER_SETTINGS = (
    TierSetting(
        "remote.log.storage.manager.class.name",
        None,
        f"the plugin that wrote the tier: {AIVEN_RSM} or Kafka's {LOCAL_TIERED_STORAGE}",
    ),
    TierSetting(
        "rlmm.config.remote.log.metadata.topic.num.partitions",
        "50",
        f"partitions of {METADATA_TOPIC} (where a live cluster's metadata is read from)",
    ),
    TierSetting(
        "rlmm.config.remote.log.metadata.topic.retention.ms",
        "-1",
        f"how long {METADATA_TOPIC} keeps its records (-1, Kafka's default: for ever; with a limit, its "
        "log may begin above 0)",
    ),
    TierSetting(
        "rsm.config.storage.backend.class",
        None,
        f"Aiven: the storage backend, {AIVEN_FILESYSTEM}, {AIVEN_S3}, {AIVEN_GCS} or {AIVEN_AZURE}",
    ),
    TierSetting("rsm.config.storage.root", None, "Aiven's filesystem backend: the directory it writes under"),
    TierSetting("rsm.config.storage.s3.bucket.name", None, "Aiven's S3 backend: the bucket"),
    TierSetting(
        "rsm.config.storage.s3.endpoint.url",
        None,
        "Aiven's S3 backend: an endpoint other than AWS's (else AWS_ENDPOINT_URL or AWS's own)",
    ),
    TierSetting("rsm.config.storage.s3.region", None, "Aiven's S3 backend: the bucket's region"),
    TierSetting(
        "rsm.config.storage.aws.access.key.id",
        None,
        "Aiven's S3 backend: an access key (else the usual AWS chain: environment, profile, role)",
    ),
    TierSetting("rsm.config.storage.aws.secret.access.key", None, "Aiven's S3 backend: its secret"),
    TierSetting("rsm.config.storage.gcs.bucket.name", None, "Aiven's GCS backend: the bucket"),
    TierSetting(
        "rsm.config.storage.gcs.endpoint.url",
        None,
        "Aiven's GCS backend: an endpoint other than Google's (else STORAGE_EMULATOR_HOST or Google's own)",
    ),
    TierSetting(
        "rsm.config.storage.gcs.credentials.json",
        None,
        "Aiven's GCS backend: credentials as a JSON document (a service account's or user's, or "
        '`{"access_token": ...}`); exactly one of the three credential settings, as the plugin requires',
    ),
    TierSetting(
        "rsm.config.storage.gcs.credentials.path", None, "Aiven's GCS backend: a file holding that document"
    ),
    TierSetting(
        "rsm.config.storage.gcs.credentials.default",
        None,
        "Aiven's GCS backend: `true`, Google's default credentials (the environment, gcloud, the "
        "metadata server); `false`, none",
    ),
    TierSetting(AZURE + "container.name", None, "Aiven's Azure backend: the container"),
    TierSetting(
        AZURE + "account.name",
        None,
        "Aiven's Azure backend: the storage account (its endpoint is https://<account>.blob.core.windows.net)",
    ),
    TierSetting(
        AZURE + "account.key",
        None,
        "Aiven's Azure backend: the account's shared key (else the SAS token, else Azure's default "
        "credential chain: environment, managed identity, Azure CLI)",
    ),
    TierSetting(AZURE + "sas.token", None, "Aiven's Azure backend: a shared access signature"),
    TierSetting(
        AZURE + "endpoint.url", None, "Aiven's Azure backend: a Blob endpoint other than the account's own"
    ),
    TierSetting(
        AZURE + "connection.string",
        None,
        "Aiven's Azure backend: a connection string, alone (never with the account, key, SAS token "
        "or endpoint settings, as the plugin requires)",
    ),
    TierSetting(
        "rsm.config.key.prefix",
        "",
        "Aiven: the prefix of every object key (a segment's custom "
        "metadata OBJECT_PREFIX, where present, overrides it)",
    ),
    TierSetting(
        "rsm.config.encryption.key.pairs", "", "Aiven: the ids of the RSA key pairs (comma-separated)"
    ),
    TierSetting(
        "rsm.config.encryption.key.pairs.<id>.private.key.file",
        None,
        "Aiven: the PEM private key of key pair <id>, which unwraps the data keys it wrapped",
    ),
    TierSetting(
        "rsm.config.encryption.key.pairs.<id>.public.key.file",
        None,
        "Aiven: the PEM public key of key pair <id>, which wraps the data keys of segments segpipe writes",
    ),
    TierSetting(
        "rsm.config.encryption.key.pair.id",
        None,
        "Aiven: the key pair new segments' data keys are wrapped with",
    ),
    TierSetting(
        "rsm.config.chunk.size", None, "Aiven: the bytes of a segment in one chunk of segments segpipe writes"
    ),
    TierSetting(
        "rsm.config.compression.enabled",
        "false",
        "Aiven: whether segments segpipe writes compress each chunk (zstd)",
    ),
    TierSetting(
        "rsm.config.encryption.enabled", "false", "Aiven: whether segments segpipe writes encrypt each chunk"
    ),
    TierSetting("rsm.config.dir", None, "LocalTieredStorage: the directory it writes under"),
)
_DEFAULTS = {s.name: s.default for s in TIER_SETTINGS if s.default is not None}


def parse_properties(text: str) -> dict[str, str]:
    """A Java properties file's entries (`key=value`, `key: value` or `key value`; `#` and `!`
    comments; a trailing backslash continues a line)."""
    out: dict[str, str] = {}
    logical = re.sub(r"\\\r?\n[ \t\f]*", "", text)
    for raw in logical.splitlines():
        line = raw.lstrip(" \t\f")
        if not line or line[0] in "#!":
            continue
        match = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:\s]?\s*(.*)$", line)
        if match:
            key = re.sub(r"\\(.)", r"\1", match[1])
            out[key] = match[2].rstrip("\r")
    return out


@dataclass(frozen=True)
class TierSettings:
    """The settings of one broker's remote tier, as segpipe reads them."""

    source: str  # the properties file they came from (what errors name)
    plugin: str
    storage_url: str  # where the plugin's objects are: a directory, or s3://bucket
    storage_setting: str  # the setting that names it (what a wrong place is reported by)
    key_prefix: str = ""
    private_keys: dict[str, str] = field(default_factory=dict)  # key pair id -> PEM file
    metadata_partitions: int = 50
    metadata_retained: bool = True  # the metadata topic keeps every record (its log begins at 0)
    storage_options: dict[str, Any] = field(default_factory=dict)
    # How the plugin writes a segment (what a rewritten segment is written with).
    public_keys: dict[str, str] = field(default_factory=dict)  # key pair id -> PEM file
    active_key_pair: str | None = None
    chunk_size: int | None = None
    compression: bool = False
    encryption: bool = False

    @classmethod
    def parse(cls, text: str, source: str) -> TierSettings:
        values = {**_DEFAULTS, **parse_properties(text)}

        def get(name: str) -> str | None:
            """A setting's value; one that still holds a `${...}` placeholder is refused (a template
            copied without its values would otherwise point at a place named `${BUCKET}`)."""
            value = values.get(name)
            if value is not None and re.search(r"\$\{[^}]*\}", value):
                raise KafkaTierSettings(
                    f"{source}: {name}={value} holds a placeholder nobody filled in: give the value the "
                    "broker ran with"
                )
            return value

        def need(name: str) -> str:
            value = get(name)
            if not value:
                raise KafkaTierSettings(f"{source}: {name} is not set")
            return value

        def need_or_empty(name: str) -> str:
            return get(name) or ""

        def number(name: str) -> int | None:
            """A positive whole number, or None where the setting is absent and has no default."""
            value = get(name)
            if value is None:
                return None
            if not value.strip().isdigit() or int(value) < 1:
                raise KafkaTierSettings(f"{source}: {name}={value!r} is not a positive number")
            return int(value)

        plugin = need("remote.log.storage.manager.class.name")
        partitions = number("rlmm.config.remote.log.metadata.topic.num.partitions")
        assert partitions is not None  # the table gives it a default
        retention = need("rlmm.config.remote.log.metadata.topic.retention.ms").strip()
        if not retention.lstrip("-").isdigit():
            raise KafkaTierSettings(
                f"{source}: rlmm.config.remote.log.metadata.topic.retention.ms={retention!r} is not a number"
            )
        retained = int(retention) < 0
        if plugin == LOCAL_TIERED_STORAGE:
            return cls(
                source,
                plugin,
                need("rsm.config.dir"),
                "rsm.config.dir",
                metadata_partitions=partitions,
                metadata_retained=retained,
            )
        if plugin != AIVEN_RSM:
            raise KafkaTierSettings(
                f"{source}: remote.log.storage.manager.class.name is {plugin}; segpipe reads the remote "
                f"tiers of {AIVEN_RSM} and {LOCAL_TIERED_STORAGE}"
            )
        place = backend_place(need("rsm.config.storage.backend.class"), get, source)
        keys: dict[str, dict[str, str]] = {"private": {}, "public": {}}
        pairs = need_or_empty("rsm.config.encryption.key.pairs").split(",")
        for pair in filter(None, (p.strip() for p in pairs)):
            for kind, found in keys.items():
                path = get(f"rsm.config.encryption.key.pairs.{pair}.{kind}.key.file")
                if path:
                    found[pair] = (
                        path if posixpath.isabs(path) else posixpath.join(posixpath.dirname(source), path)
                    )
        return cls(
            source,
            plugin,
            place.url,
            place.setting,
            key_prefix=need_or_empty("rsm.config.key.prefix"),
            private_keys=keys["private"],
            metadata_partitions=partitions,
            metadata_retained=retained,
            storage_options=place.options,
            public_keys=keys["public"],
            active_key_pair=get("rsm.config.encryption.key.pair.id"),
            chunk_size=number("rsm.config.chunk.size"),
            compression=need_or_empty("rsm.config.compression.enabled").strip().lower() == "true",
            encryption=need_or_empty("rsm.config.encryption.enabled").strip().lower() == "true",
        )
