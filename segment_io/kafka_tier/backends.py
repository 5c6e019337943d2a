"""Where Aiven's plugin keeps a tier's objects, by its storage backend (`rsm.config.storage.
backend.class`): the URL segpipe reads them at, the setting that names it, and the fsspec options
that reach it with the credentials the plugin's own settings give (else each store's usual
chain). The settings' names and meanings are rows of `settings.TIER_SETTINGS`."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from segment_io.errors import KafkaTierSettings

AIVEN_FILESYSTEM = "io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage"
AIVEN_S3 = "io.aiven.kafka.tieredstorage.storage.s3.S3Storage"
AIVEN_GCS = "io.aiven.kafka.tieredstorage.storage.gcs.GcsStorage"
AIVEN_AZURE = "io.aiven.kafka.tieredstorage.storage.azure.AzureBlobStorage"
AZURE = "rsm.config.storage.azure."
GCS_CREDENTIALS = tuple(f"rsm.config.storage.gcs.credentials.{k}" for k in ("json", "path", "default"))

Get = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Place:
    """Where a backend's objects are: its URL, the setting that names it, the options to open it."""

    url: str
    setting: str
    options: dict[str, Any]


def _filesystem(get: Get, source: str) -> Place:
    where = "rsm.config.storage.root"
    return Place(_need(get, where, source), where, {})


def _s3(get: Get, source: str) -> Place:
    where = "rsm.config.storage.s3.bucket.name"
    options: dict[str, Any] = {}
    client: dict[str, str] = {}
    if endpoint := get("rsm.config.storage.s3.endpoint.url"):
        client["endpoint_url"] = endpoint
    if region := get("rsm.config.storage.s3.region"):
        client["region_name"] = region
    if client:
        options["client_kwargs"] = client
    if access := get("rsm.config.storage.aws.access.key.id"):
        options["key"] = access
        options["secret"] = get("rsm.config.storage.aws.secret.access.key") or ""
    return Place("s3://" + _need(get, where, source), where, options)


def _gcs(get: Get, source: str) -> Place:
    """The plugin takes exactly one of its three credential settings (it refuses to start
    otherwise): a JSON document, a file holding one, or the default chain (`true`) or none
    (`false`: anonymous). A document is a service account's or a user's, or `{"access_token": ...}`."""
    where = "rsm.config.storage.gcs.bucket.name"
    options: dict[str, Any] = {}
    if endpoint := get("rsm.config.storage.gcs.endpoint.url"):
        options["endpoint_url"] = endpoint
    given = {name: value for name in GCS_CREDENTIALS if (value := get(name)) is not None}
    if len(given) != 1:
        names = ", ".join(GCS_CREDENTIALS)
        raise KafkaTierSettings(
            f"{source}: Aiven's GCS backend takes exactly one of {names} "
            f"(given: {', '.join(given) or 'none'})"
        )
    ((name, value),) = given.items()
    if name.endswith(".default"):
        options["token"] = "google_default" if value.strip().lower() == "true" else "anon"
    else:
        options["token"] = _gcs_token(name, value, source)
    return Place("gs://" + _need(get, where, source), where, options)


def _gcs_token(name: str, value: str, source: str) -> Any:
    """A GCS credentials document (given inline or by its file) as gcsfs takes it: an access
    token as credentials that hold it, any other document as its fields."""
    text = value
    if name.endswith(".path"):
        try:
            with open(value, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise KafkaTierSettings(f"{source}: {name}={value}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text)
    except ValueError:
        raise KafkaTierSettings(f"{source}: {name}: not a JSON credentials document") from None
    if not isinstance(doc, dict):
        raise KafkaTierSettings(f"{source}: {name}: not a JSON credentials document")
    if set(doc) != {"access_token"}:
        return doc
    # A bare access token, used as it is (gcsfs would look a token given as text up online first).
    from google.oauth2.credentials import Credentials

    return Credentials(token=str(doc["access_token"]))


def _azure(get: Get, source: str) -> Place:
    """The plugin's rules: a connection string alone (never with an account name, key, SAS token
    or endpoint), else an account name and/or a SAS token; with an account key the shared key
    signs, else the SAS token, else Azure's default credential chain. Its endpoint is
    `https://<account>.blob.core.windows.net` unless `azure.endpoint.url` says otherwise."""
    where = AZURE + "container.name"
    container = _need(get, where, source)
    connection = get(AZURE + "connection.string")
    name, key, sas = get(AZURE + "account.name"), get(AZURE + "account.key"), get(AZURE + "sas.token")
    endpoint = get(AZURE + "endpoint.url")
    if connection is not None:
        clash = [n for n, v in (("account.name", name), ("account.key", key), ("sas.token", sas)) if v]
        clash += ["endpoint.url"] if endpoint else []
        if clash:
            raise KafkaTierSettings(
                f"{source}: {AZURE}connection.string cannot be set together with {AZURE}{clash[0]} "
                "(as Aiven's Azure backend refuses)"
            )
        return Place("az://" + container, where, {"connection_string": connection})
    if not name and not sas:
        raise KafkaTierSettings(
            f"{source}: {AZURE}account.name and/or {AZURE}sas.token must be set if "
            f"{AZURE}connection.string is not set (as Aiven's Azure backend requires)"
        )
    if endpoint:
        return Place("az://" + container, where, _azure_at(endpoint, name, key, sas, source))
    if not name:
        raise KafkaTierSettings(
            f"{source}: {AZURE}sas.token without {AZURE}account.name needs {AZURE}endpoint.url "
            "(the account's endpoint is named after it)"
        )
    options: dict[str, Any] = {"account_name": name}
    if key:
        options["account_key"] = key
    elif sas:
        options["sas_token"] = sas
    else:
        options["anon"] = False  # Azure's default credential chain, as the plugin uses
    return Place("az://" + container, where, options)


def _azure_at(
    endpoint: str, name: str | None, key: str | None, sas: str | None, source: str
) -> dict[str, Any]:
    """The options that reach the Blob endpoint `endpoint` (an emulator's, a private link's) with
    the credential the settings give: as a connection string, which carries any endpoint."""
    if key and name:
        scheme = endpoint.partition("://")[0] or "https"
        account = f"AccountName={name};AccountKey={key}"
        return {"connection_string": f"DefaultEndpointsProtocol={scheme};{account};BlobEndpoint={endpoint};"}
    if sas:
        return {"connection_string": f"BlobEndpoint={endpoint};SharedAccessSignature={sas.lstrip('?')};"}
    scheme, _, host = endpoint.partition("://")
    if scheme == "https" and host and "/" not in host.rstrip("/"):
        return {"account_name": name, "account_host": host.rstrip("/"), "anon": False}
    raise KafkaTierSettings(
        f"{source}: {AZURE}endpoint.url={endpoint} with Azure's default credential chain: segpipe reaches "
        "a custom endpoint so only as https://HOST; give an account key or SAS token"
    )


BACKENDS: dict[str, Callable[[Get, str], Place]] = {
    AIVEN_FILESYSTEM: _filesystem,
    AIVEN_S3: _s3,
    AIVEN_GCS: _gcs,
    AIVEN_AZURE: _azure,
}


def backend_place(backend: str, get: Get, source: str) -> Place:
    """Where the objects of `backend` are, as the settings (`get`) of `source` say."""
    read = BACKENDS.get(backend)
    if read is None:
        raise KafkaTierSettings(
            f"{source}: rsm.config.storage.backend.class is {backend}; segpipe reads Aiven's "
            f"{', '.join(BACKENDS)}"
        )
    return read(get, source)


def _need(get: Get, name: str, source: str) -> str:
    value = get(name)
    if not value:
        raise KafkaTierSettings(f"{source}: {name} is not set")
    return value
