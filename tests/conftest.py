"""Shared fixtures: generated log directories, storage handles, fixed clocks."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("NUMBA_CACHE_DIR", str(Path(__file__).resolve().parents[1] / ".venv" / "numba-cache"))
# gcsfs, by default, asks Google's control API (gRPC) what kind of bucket each is, which a GCS
# emulator cannot answer: every first request to a bucket would wait 60 s. Read when gcsfs is
# imported, so set before anything imports it (tests/gcs).
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

from segment_io.generate import generate_log_dir
from segment_io.storage import Storage, open_storage

FIXED_NOW_MS = 1_701_000_000_000

# The files that take longest (seconds of one worker, measured on 2 cores with the whole suite
# running), run first: two workers take files one at a time, and a long file taken last would
# leave the other worker idle at the end (a file of 30-40 s left to the end idled one for 1-2
# min). Any file not named (each under 12 s) keeps its place after these. xdist keeps this order
# only with --no-loadscope-reorder (the Makefile's test command): by default it hands out the
# files with the most tests first.
SLOWEST_FIRST = (
    "kafka/test_kafka_tier_compact.py",  # 150 (its broker 46, its two tests 59 and 38)
    "connect/test_jobs_on_connect.py",  # 202
    "airflow/test_dags.py",  # 166
    "cluster/test_spark_submit.py",  # 134
    "kafka/test_kafka_tier_erase.py",  # 120
    "kafka/test_kafka_tier_broker.py",  # 95
    "e2e/test_stop.py",  # 85
    "gcs/test_gcs.py",  # 110
    "s3/test_erase_s3.py",  # 76
    "s3/test_tier_seaweedfs.py",  # 74
    "s3/test_tier_s3.py",  # 73
    "azure/test_azure.py",  # 56
    "spark/test_datasource_pushdown.py",  # 49
    "s3/test_clean_s3.py",  # 47
    "e2e/test_erase.py",  # 46
    "e2e/test_clean_cli.py",  # 40
    "spark/test_validate.py",  # 39
    "s3/test_tier_safety.py",  # 38
    "s3/test_tier_model.py",  # 36
    "e2e/test_kafka_tier_cli.py",  # 34
    "kafka/test_reference_cleaner.py",  # 30
    "kafka/test_cut_broker.py",  # 28
    "e2e/test_clean_validate.py",  # 22
    "e2e/test_cli.py",  # 20
    "kafka/test_restore.py",  # 20
    "s3/test_tier_faults.py",  # 17
    "spark/test_datasource.py",  # 16
    "kafka/test_erase_broker.py",  # 15
    "spark/test_kafka_tier_source.py",  # 13
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put the slowest files first (stable: tests keep their order inside a file)."""
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    here = Path(__file__).parent

    def key(item: pytest.Item) -> int:
        name = Path(str(item.path)).relative_to(here).as_posix() if item.path.is_relative_to(here) else ""
        return rank.get(name, len(rank))

    items.sort(key=key)


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
    """One local[2] SparkSession per test run. Its workers preload every job's modules and the S3
    client from the start: the jobs the tests run in it one after another then share one worker
    daemon (a preload list only grows, session.grown_preload), where each new list would start
    one more (a second or more of CPU each, with PySpark's data-source planners)."""
    from pipelines.runtime.session import get_spark, preload_in_workers
    from segment_io.storage import load_client
    from tests.connect_server import server_preload

    session = get_spark("local[2]", app_name="segpipe-tests")
    load_client("s3://")
    preload_in_workers(session, server_preload())
    yield session
    session.stop()


@pytest.fixture(scope="module")
def seaweed_env() -> Iterator[dict[str, str]]:
    """A SeaweedFS server (master, volume, filer and S3 gateway in one process) for this module,
    the AWS variables pointing every client at it."""
    from tests.s3.stores import aws_endpoint, seaweedfs

    with seaweedfs() as url, aws_endpoint(url) as env:
        yield env
