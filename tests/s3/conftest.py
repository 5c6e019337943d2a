"""Real S3 endpoints for the tests of this folder, each started and stopped by a module fixture
and bound to 127.0.0.1: moto's server (`s3_env`, milliseconds to start) and SeaweedFS, a real
object store whose S3 gateway serves the end-to-end tier tests (`seaweed_env`). The AWS variables
point every client (s3fs, boto3, segpipe's subprocesses) at the endpoint of the module's tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.s3.stores import seaweedfs


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


@pytest.fixture(scope="module")
def s3_env() -> Iterator[dict[str, str]]:
    """A moto S3 server for this module only."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    try:
        with aws_endpoint(f"http://{host}:{port}") as env:
            yield env
    finally:
        server.stop()


@pytest.fixture(scope="module")
def seaweed_env() -> Iterator[dict[str, str]]:
    """A SeaweedFS server (master, volume, filer and S3 gateway in one process) for this module."""
    with seaweedfs() as url, aws_endpoint(url) as env:
        yield env
