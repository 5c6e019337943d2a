"""What segpipe asks an S3 store (seen through the recording proxy in front of moto): a folder
is listed in one request, and whether a bucket exists is asked once per client, not before every
write; the answers mean what they did (a missing folder lists empty, a file is not a folder, the
first write to a missing bucket creates it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from segment_io.storage import Storage, open_storage
from tests.fault_proxy import FaultProxy
from tests.s3.stores import aws_endpoint
from tests.s3.test_tier_s3 import BUCKET, bucket

pytestmark = pytest.mark.s3


@pytest.fixture
def proxied(s3_env: dict[str, str], tmp_path: Path) -> Iterator[tuple[FaultProxy, Storage, str]]:
    """A storage whose client reaches moto through the proxy, and a fresh prefix in the test
    bucket. A client with the same options but moto's own address has written to the bucket
    first, and is still held: what one client learnt is not taken for another's."""
    root = bucket(s3_env, f"requests-{tmp_path.name}").removeprefix("s3://")
    direct, _ = open_storage(f"s3://{root}")
    direct.write_atomic(f"{root}-direct/written", b"direct")
    with FaultProxy(s3_env["AWS_ENDPOINT_URL"]) as proxy, aws_endpoint(proxy.url):
        storage, _ = open_storage(f"s3://{root}")
        assert not storage.same_store(direct)
        yield proxy, storage, root
    del direct


def test_a_folder_is_listed_in_one_request(proxied: tuple[FaultProxy, Storage, str]) -> None:
    proxy, storage, root = proxied
    storage.write_atomic(f"{root}/orders-0/00000000000000000000.log", b"log")
    storage.write_atomic(f"{root}/orders-0/00000000000000000000.index", b"index")
    proxy.seen.clear()
    listed = storage.list(f"{root}/orders-0")
    assert [f.name for f in listed] == ["00000000000000000000.index", "00000000000000000000.log"]
    assert [f.size for f in listed] == [5, 3]
    assert [method for method, _ in proxy.seen] == ["GET"]
    assert storage.list(f"{root}/orders-1") == []  # nothing there
    assert storage.list(f"{root}/orders-0/00000000000000000000.log") == []  # a file, not a folder


def test_a_bucket_is_asked_about_once_per_client(proxied: tuple[FaultProxy, Storage, str]) -> None:
    proxy, storage, root = proxied
    proxy.seen.clear()
    for n in range(5):
        storage.write_atomic(f"{root}/partition-{n}/leader-epoch-checkpoint", b"0\n0\n")
    again, _ = open_storage(f"s3://{root}")  # another storage over the same client
    again.write_atomic(f"{root}/partition-5/leader-epoch-checkpoint", b"0\n0\n")
    assert [path for method, path in proxy.seen if method == "HEAD"] == [f"/{BUCKET}"]
    assert sum(method == "PUT" for method, _ in proxy.seen) == 6
    assert [f.name for f in storage.list(root)] == [f"partition-{n}" for n in range(6)]


def test_the_first_write_to_a_missing_bucket_creates_it(proxied: tuple[FaultProxy, Storage, str]) -> None:
    _, storage, _ = proxied
    fresh = "segpipe-made-by-a-write"  # moto's server is this module's own
    assert not storage.exists(fresh)
    storage.write_atomic(f"{fresh}/topic-0/00000000000000000000.log", b"made")
    assert storage.read(f"{fresh}/topic-0/00000000000000000000.log") == b"made"
