"""Shared fixtures: generated log directories, storage handles, fixed clocks."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("NUMBA_CACHE_DIR", str(Path(__file__).resolve().parents[1] / ".venv" / "numba-cache"))

from segment_io.generate import generate_log_dir
from segment_io.storage import Storage, open_storage

FIXED_NOW_MS = 1_701_000_000_000


@pytest.fixture(scope="session")
def sample_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default generated set (every feature), written once per test run."""
    root = tmp_path_factory.mktemp("samples") / "logs"
    storage, path = open_storage(str(root))
    generate_log_dir(storage, path)
    return root


@pytest.fixture
def local(tmp_path: Path) -> tuple[Storage, str]:
    return open_storage(str(tmp_path))


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """One local[2] SparkSession per test run."""
    from pipelines.runtime.session import get_spark

    session = get_spark("local[2]", app_name="segpipe-tests")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def seaweed_env() -> Iterator[dict[str, str]]:
    """A SeaweedFS server (master, volume, filer and S3 gateway in one process) for this module,
    the AWS variables pointing every client at it."""
    from tests.s3.stores import aws_endpoint, seaweedfs

    with seaweedfs() as url, aws_endpoint(url) as env:
        yield env
