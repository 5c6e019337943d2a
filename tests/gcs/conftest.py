"""A GCS endpoint for the tests of this folder: gcp-storage-emulator's server in a thread of this
process, bound to 127.0.0.1, one per module. The variables point gcsfs (here and in segpipe's
subprocesses) at it, anonymously, and keep Google's auth library from looking for a metadata
server (each look would wait on 169.254.169.254)."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from http.server import ThreadingHTTPServer
from typing import Any

import pytest


def _serialized(method: Callable[[Any], None], lock: threading.Lock) -> Callable[[Any], None]:
    def one_at_a_time(handler: Any) -> None:
        with lock:
            method(handler)

    return one_at_a_time


@contextmanager
def gcs_emulator() -> Iterator[str]:
    """The emulator on a free port of 127.0.0.1 (its objects in memory): its URL."""
    from gcp_storage_emulator import server as emulator

    class ThreadedAPI(emulator.APIThread):  # type: ignore[misc]
        """Its API with a thread per connection: the emulator's own server takes one connection
        at a time, and one a client opened and has not yet used holds up every other (a download
        of a directory took a second a file). The requests themselves still go one at a time:
        its storage is not safe for two at once (its resumable uploads are one document, read
        and written whole, and an upload was lost so)."""

        def run(self) -> None:
            handler = partial(OneAtATime, self._storage)
            self._httpd = ThreadingHTTPServer((self._host, self._port), handler)
            self.is_running.set()
            self._httpd.serve_forever()

    one = threading.Lock()

    class OneAtATime(emulator.RequestHandler):  # type: ignore[misc]
        pass

    for verb in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"):
        method = getattr(emulator.RequestHandler, f"do_{verb}", None)
        if method is not None:
            setattr(OneAtATime, f"do_{verb}", _serialized(method, one))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = emulator.create_server("127.0.0.1", port, in_memory=True, default_bucket=None)
    server._api = ThreadedAPI("127.0.0.1", port, server._storage)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@contextmanager
def gcs_endpoint(url: str) -> Iterator[dict[str, str]]:
    """The variables of a test endpoint, set for this process while the block runs."""
    import gcsfs

    env = {
        "STORAGE_EMULATOR_HOST": url,
        "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
        "NO_GCE_CHECK": "true",
        "GCE_METADATA_HOST": "127.0.0.1:9",  # nothing listens there: the look fails at once
        "GCE_METADATA_IP": "127.0.0.1:9",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    gcsfs.GCSFileSystem.clear_instance_cache()  # a cached client would still talk to the last endpoint
    try:
        yield env
    finally:
        gcsfs.GCSFileSystem.clear_instance_cache()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def gcs_env() -> Iterator[dict[str, str]]:
    with gcs_emulator() as url, gcs_endpoint(url) as env:
        yield env
