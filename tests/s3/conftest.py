"""Real S3 endpoints for the tests of this folder, each started and stopped by a module fixture
and bound to 127.0.0.1: moto's server (`s3_env`, milliseconds to start) and SeaweedFS, a real
object store whose S3 gateway serves the end-to-end tier tests (`seaweed_env`). The AWS variables
point every client (s3fs, boto3, segpipe's subprocesses) at the endpoint of the module's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.s3.stores import aws_endpoint, moto_server


@pytest.fixture(scope="module")
def s3_env() -> Iterator[dict[str, str]]:
    """A moto S3 server for this module only."""
    with moto_server() as url, aws_endpoint(url) as env:
        yield env
