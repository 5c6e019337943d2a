"""Local S3 servers, started and stopped by their owner (test fixtures, benchmarks), bound to
127.0.0.1: SeaweedFS, a real object store from PyPI (`weed`, in the virtualenv's bin), and
moto's server."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

START_TIMEOUT_S = 60  # SeaweedFS answers in seconds; give up (and fail) after this
START_ATTEMPTS = 3


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ports(count: int) -> list[int]:
    """`count` consecutive free ports whose gRPC twins (port + 10000) are free too, all below the
    kernel's ephemeral range (32768 up), where the ports other servers and every outgoing
    connection of the tests are handed out: one taken between this check and SeaweedFS's bind
    would stop it."""
    for _ in range(200):
        first = random.randrange(10000, 22000 - count)
        ports = list(range(first, first + count))
        if all(_free(p) and _free(p + 10000) for p in ports):
            return ports
    raise RuntimeError("no free ports for SeaweedFS")


@contextmanager
def seaweedfs() -> Iterator[str]:
    """A SeaweedFS server (master, volume, filer and S3 gateway in one process); yields its S3
    endpoint URL, and is killed and its data removed on exit."""
    data = Path(tempfile.mkdtemp(prefix="segpipe-seaweedfs-"))
    try:
        # A port can still be taken by another server of the suite between the check and the
        # bind (SeaweedFS then exits at once): a start that ends so is tried again, on new ports.
        for attempt in range(START_ATTEMPTS):
            proc, s3 = _start(data / str(attempt))  # a fresh directory for each
            if _answers(proc, s3):
                break
            _stop(proc)
            if attempt == START_ATTEMPTS - 1:
                raise RuntimeError(f"SeaweedFS did not start (exit {proc.poll()}; {START_ATTEMPTS} attempts)")
        try:
            yield f"http://127.0.0.1:{s3}"
        finally:
            _stop(proc)
    finally:
        shutil.rmtree(data, ignore_errors=True)


def _start(data: Path) -> tuple[subprocess.Popen[bytes], int]:
    weed = Path(sys.executable).parent / "weed"
    data.mkdir()
    s3, master, volume, filer = _ports(4)
    proc = subprocess.Popen(
        [
            str(weed),
            "server",
            f"-dir={data}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-s3",
            f"-s3.port={s3}",
            f"-master.port={master}",
            f"-volume.port={volume}",
            f"-filer.port={filer}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return proc, s3


def _answers(proc: subprocess.Popen[bytes], s3: int) -> bool:
    """Whether the S3 gateway answers (False: the process ended, or START_TIMEOUT_S passed)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{s3}/", timeout=2) as answer:
                if answer.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.25)
    return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # it does not always stop on SIGTERM
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@contextmanager
def moto_server() -> Iterator[str]:
    """moto's S3 server in a thread of this process, on 127.0.0.1 and a free port: its URL.

    Two things moto does per request that answer the same for the whole run are done once: the
    listing of its own package's directories, which it scans (a `stat` of each of its ~180
    service folders) twice per request to tell a service from a host name, about a fifth of
    what a request costs it; and a log line per request on stderr. What it answers is unchanged."""
    import logging

    from moto import backends
    from moto.server import ThreadedMotoServer

    scan, modules = backends.list_of_moto_modules, tuple(backends.list_of_moto_modules())
    logger = logging.getLogger("werkzeug")
    level = logger.level
    logger.setLevel(logging.WARNING)
    backends.list_of_moto_modules = lambda: modules  # type: ignore[assignment]
    try:
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        try:
            host, port = server.get_host_and_port()
            yield f"http://{host}:{port}"
        finally:
            server.stop()
    finally:
        backends.list_of_moto_modules = scan  # type: ignore[assignment]
        logger.setLevel(level)


@contextmanager
def aws_endpoint(url: str) -> Iterator[dict[str, str]]:
    """The AWS variables of a test endpoint, set for this process while the block runs."""
    import s3fs

    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_ENDPOINT_URL": url,
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    s3fs.S3FileSystem.clear_instance_cache()  # a cached client would still talk to the last endpoint
    try:
        yield env
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def in_session_workers(spark: Any, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The variables of `env` (set for this process by aws_endpoint) in the Python workers of this
    process's Spark session too, until the test ends: they take the context's environment with
    every task, not this process's."""
    for name, value in env.items():
        monkeypatch.setitem(spark.sparkContext.environment, name, value)
