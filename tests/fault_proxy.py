"""A small HTTP proxy in front of an object store's endpoint (S3, GCS or Azure Blob Storage) that
injects the faults object stores show: throttling, server errors, refusals, dropped connections
and stalls, each answered in that store's own words (`S3`, `GCS`, `AZURE`); it records every
request it passed on or answered. Bound to 127.0.0.1, one thread per connection, stopped by
`stop()` (or the `with` block)."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

MESSAGE = "injected by the test proxy"
BODY_HEAD = 4096  # where a request's body may name its object
# A store's error answer for a status and its error code: the headers and the body.
ErrorAnswer = Callable[[int, str], tuple[dict[str, str], bytes]]


def s3_error(status: int, code: str) -> tuple[dict[str, str], bytes]:
    body = f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>{MESSAGE}</Message></Error>"
    return {"Content-Type": "application/xml"}, body.encode()


def gcs_error(status: int, code: str) -> tuple[dict[str, str], bytes]:
    """The JSON API's error document (`code` is its reason, e.g. rateLimitExceeded)."""
    error = {"code": status, "message": MESSAGE, "errors": [{"reason": code, "message": MESSAGE}]}
    return {"Content-Type": "application/json; charset=UTF-8"}, json.dumps({"error": error}).encode()


def azure_error(status: int, code: str) -> tuple[dict[str, str], bytes]:
    """Blob Storage names its error in a header as well as in the body (e.g. ServerBusy)."""
    body = f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code><Message>{MESSAGE}</Message></Error>'
    return {"Content-Type": "application/xml", "x-ms-error-code": code}, body.encode()


S3: ErrorAnswer = s3_error
GCS: ErrorAnswer = gcs_error
AZURE: ErrorAnswer = azure_error


@dataclass
class Fault:
    """What to do to the next `times` requests matching `method` and naming `path_contains`: in
    the path with its escapes undone (GCS names an object in one escaped segment) or in the head
    of the body (a GCS upload names its object in the metadata part)."""

    kind: str  # "status", "drop" or "stall"
    method: str
    path_contains: str = ""
    times: int = 1  # -1: every matching request
    status: int = 503
    code: str = "SlowDown"
    seconds: float = 0.0
    hits: int = 0

    def matches(self, method: str, path: str, body: bytes) -> bool:
        named = self.path_contains in unquote(path) or self.path_contains.encode() in body[:BODY_HEAD]
        return method == self.method and named and (self.times < 0 or self.hits < self.times)


@dataclass
class FaultProxy:
    upstream: str  # http://host:port of the real endpoint
    errors: ErrorAnswer = S3
    faults: list[Fault] = field(default_factory=list)
    seen: list[tuple[str, str]] = field(default_factory=list)  # every request: (method, path)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None
    thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def add(self, fault: Fault) -> None:
        with self.lock:
            self.faults.append(fault)

    def clear(self) -> None:
        with self.lock:
            self.faults.clear()

    def take(self, method: str, path: str, body: bytes) -> Fault | None:
        with self.lock:
            self.seen.append((method, path))
            for fault in self.faults:
                if fault.matches(method, path, body):
                    fault.hits += 1
                    return fault
        return None

    def start(self) -> FaultProxy:
        proxy = self
        upstream = urlsplit(self.upstream)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                del format, args

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    raw = b""
                    while True:
                        line = self.rfile.readline()
                        raw += line
                        size = int(line.split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while True:  # trailers, then the empty line
                                trailer = self.rfile.readline()
                                raw += trailer
                                if trailer in (b"\r\n", b"\n", b""):
                                    return raw
                        raw += self.rfile.read(size + 2)
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _handle(self) -> None:
                body = self._body()
                fault = proxy.take(self.command, self.path, body)
                if fault is not None and fault.kind == "drop":
                    self.close_connection = True
                    self.connection.close()  # no response at all: the client sees a dropped connection
                    return
                if fault is not None and fault.kind == "stall":
                    time.sleep(fault.seconds)
                if fault is not None and fault.kind == "status":
                    headers, payload = proxy.errors(fault.status, fault.code)
                    self.send_response(fault.status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items()}
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    response = conn.getresponse()
                    data = response.read()
                finally:
                    conn.close()
                self.send_response(response.status)
                length = str(len(data))
                for name, value in response.getheaders():
                    if name.lower() == "content-length" and self.command == "HEAD":
                        length = value  # a HEAD's length is the object's, with no body
                    elif name.lower() == "location":  # a resumable upload's next URL: through us too
                        self.send_header(name, value.replace(proxy.upstream, proxy.url))
                    elif name.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(name, value)
                self.send_header("Content-Length", length)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_PATCH = do_DELETE = do_HEAD = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        if self.thread is not None:
            self.thread.join(timeout=10)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
