"""A URL opened as storage, by its scheme: a local path (or `file://`) is the local disk, a view's
scheme (a log kept in several places) its view, anything else an fsspec file system."""

from __future__ import annotations

import importlib
import os
from typing import Any, cast

from segment_io.storage.base import Storage
from segment_io.storage.local import LocalStorage
from segment_io.storage.object_store import ObjectStorage

# Views that read a log kept in several places as one log directory, by their URL's scheme: the
# module and function that open one (imported on use: a view's module imports storage itself).
VIEW_OPENERS = {
    "tiered": ("segment_io.remote.view", "open_tiered"),  # a log directory and segpipe's remote tier
    "kafka-tier": ("segment_io.kafka_tier.view", "open_kafka_tier"),  # a broker's and its KIP-405 tier
}


def open_storage(url: str, **options: Any) -> tuple[Storage, str]:
    """The storage for `url` and the path inside it (local paths made absolute)."""
    view, colon, _ = url.partition(":")
    if colon and view in VIEW_OPENERS:
        module, function = VIEW_OPENERS[view]
        opener: Any = getattr(importlib.import_module(module), function)
        return cast(tuple[Storage, str], opener(url))
    scheme, sep, rest = url.partition("://")
    if not sep or scheme == "file":
        path = os.path.abspath(rest if sep else url)
        return LocalStorage(), path.rstrip("/") or "/"
    import fsspec

    fs, path = fsspec.core.url_to_fs(url, **options)
    return ObjectStorage(fs, scheme), path.rstrip("/") or "/"
