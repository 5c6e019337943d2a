"""The erase's key join matches the records a list read whole matches, attributing each record to
the same key (its own first, then its first named header that carries one), over real worker
processes and however many buckets the list is spread over."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pipelines.errors import ConfigError
from pipelines.jobs.erase import join
from pipelines.jobs.erase.join import ListedRecords, SegmentMatches, run_joined
from pipelines.keys.key_digest import KeyDigest
from pipelines.keys.key_list import KeyList
from pipelines.keys.key_set import ErasedKeys, matched_entries
from pipelines.runtime.local_workers import LocalWorkers
from pipelines.runtime.session import LazySpark
from segment_io.layout import list_log_dir
from segment_io.segment.reader import SegmentReader
from segment_io.storage import open_storage
from tests.helpers import v2_batch, write_segment
from tests.unit.test_erase_keys import HEADER_RECORDS

pytestmark = pytest.mark.unit

RECORDS = [
    *HEADER_RECORDS,
    (6, 0, b"bob", b"v", [("user", b"alice")]),  # its own key first
    (7, 0, b"y", b"v", [("user", b"bob"), ("user", b"alice")]),  # its first matching header
]
LISTED = [b"alice", b"bob", b"nobody"]
SECRET = b"the secret of these tests"


@pytest.fixture(scope="module")
def spark_less() -> Iterator[LazySpark]:
    """A run's Spark that is never started: the driver's own processes do the work."""

    def no_spark() -> None:
        raise AssertionError("Spark started")

    local = LocalWorkers(2, ["pipelines.jobs.erase.join"])
    try:
        yield LazySpark(no_spark, local)
    finally:
        local.close()


def digests_of(matched: np.ndarray, digest: dict[int, str]) -> list[str | None]:
    return [digest[e] if e >= 0 else None for e in matched.tolist()]


@pytest.mark.parametrize("key_bytes", [1 << 30, 1], ids=["one-bucket-per-core", "a-bucket-per-byte"])
def test_the_join_matches_what_a_list_read_whole_matches(
    tmp_path: Path, spark_less: LazySpark, monkeypatch: pytest.MonkeyPatch, key_bytes: int
) -> None:
    monkeypatch.setattr(join, "JOIN_KEY_BYTES", key_bytes)
    write_segment(tmp_path / "log" / "t-0", 0, v2_batch(0, RECORDS))
    write_segment(tmp_path / "log" / "t-0", 8, v2_batch(8, [(8, 0, b"bob", b"v", [])]))
    (tmp_path / "keys.txt").write_bytes(b"\n".join(LISTED) + b"\n")
    storage, path = open_storage(str(tmp_path / "log"))
    [partition] = list_log_dir(storage, path).partitions
    names = ErasedKeys.of([b"user"])
    whole = ErasedKeys.of(LISTED)
    url = storage.url(path)

    def records_of(files: object) -> object:
        reader = SegmentReader(storage, files.log.path, files.base_offset)  # type: ignore[attr-defined]
        return reader.frame(np.arange(len(reader.scan().table)))

    def work(files: object, listed: list[ListedRecords]) -> tuple[int, list[int], list[int]]:
        framed = records_of(files)
        return files.base_offset, framed.offset.tolist(), listed[0].entries_of(framed.offset).tolist()  # type: ignore[attr-defined]

    segments = list(partition.segments)
    results, joined = run_joined(
        spark_less,
        KeyList.open(str(tmp_path / "keys.txt")),
        names,
        segments,
        lambda files: [(url, files)],
        [s.size for s in segments],
        2,
        work,
        str(tmp_path / "not-found"),
        KeyDigest(SECRET),
    )
    assert joined.listed == 3
    sha = [hmac.new(SECRET, k, hashlib.sha256).hexdigest() for k in LISTED]
    assert sorted(joined.found.values()) == sorted(sha[:2]) and joined.not_found == 1
    [name] = joined.not_found_files  # the digests of keys found nowhere, in a file of their bucket's
    assert (tmp_path / "not-found" / name).read_text() == sha[2] + "\n"
    expected = {}
    for files in segments:
        framed = records_of(files)
        expected[files.base_offset] = digests_of(matched_entries(framed, whole, names), dict(enumerate(sha)))  # type: ignore[arg-type]
    got = {base: digests_of(np.array(entries), joined.found) for base, _, entries in results}
    assert got == expected
    assert expected[0] == [sha[0], None, sha[1], None, sha[0], None, sha[1], sha[1]]


def test_an_empty_list_to_join_is_refused(tmp_path: Path, spark_less: LazySpark) -> None:
    write_segment(tmp_path / "log" / "t-0", 0, v2_batch(0, RECORDS))
    (tmp_path / "keys.txt").write_bytes(b"\n\n")
    storage, path = open_storage(str(tmp_path / "log"))
    segments = list(list_log_dir(storage, path).partitions[0].segments)
    with pytest.raises(ConfigError, match="holds no key"):
        run_joined(
            spark_less,
            KeyList.open(str(tmp_path / "keys.txt")),
            None,
            segments,
            lambda files: [(storage.url(path), files)],
            [1],
            2,
            lambda files, listed: None,
        )


def test_merged_matches_keep_each_record_once_by_its_first_key() -> None:
    """Matches of one segment from several buckets: each offset once, the lowest priority's key."""
    a = SegmentMatches(0, np.array([3, 1]), np.array([2, 0]), np.array([10, 11]))
    b = SegmentMatches(0, np.array([3, 5]), np.array([1, 0]), np.array([20, 21]))
    listed = ListedRecords.merged([a, b], base_offset=100)
    assert listed.offsets.tolist() == [101, 103, 105] and listed.keys.tolist() == [11, 20, 21]
    assert listed.entries_of(np.array([100, 101, 103, 104, 105, 106])).tolist() == [-1, 11, 20, -1, 21, -1]
    assert ListedRecords.merged([], 0).entries_of(np.array([1])).tolist() == [-1]
