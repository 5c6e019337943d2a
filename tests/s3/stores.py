"""Local S3 servers, started and stopped by their owner (test fixtures, benchmarks), bound to
127.0.0.1: SeaweedFS, a real object store from PyPI (`weed`, in the virtualenv's bin)."""

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

START_TIMEOUT_S = 60  # SeaweedFS answers in seconds; give up (and fail) after this


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ports(count: int) -> list[int]:
    """`count` consecutive free ports whose gRPC twins (port + 10000) are free too."""
    for _ in range(200):
        first = random.randrange(20000, 45000 - count)
        ports = list(range(first, first + count))
        if all(_free(p) and _free(p + 10000) for p in ports):
            return ports
    raise RuntimeError("no free ports for SeaweedFS")


@contextmanager
def seaweedfs() -> Iterator[str]:
    """A SeaweedFS server (master, volume, filer and S3 gateway in one process); yields its S3
    endpoint URL, and is killed and its data removed on exit."""
    weed = Path(sys.executable).parent / "weed"
    data = Path(tempfile.mkdtemp(prefix="segpipe-seaweedfs-"))
    s3, master, volume, filer = _ports(4)
    proc = subprocess.Popen(
        [str(weed), "server", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-s3", f"-s3.port={s3}",
         f"-master.port={master}", f"-volume.port={volume}", f"-filer.port={filer}", "-s3.port.iceberg=0",
         "-s3.port.lance=0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{s3}/", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"SeaweedFS did not start (exit {proc.poll()})")
            time.sleep(0.25)
        yield f"http://127.0.0.1:{s3}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # it does not always stop on SIGTERM
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        shutil.rmtree(data, ignore_errors=True)


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
