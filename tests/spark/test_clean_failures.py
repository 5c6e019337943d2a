"""`clean` on bad input: a typed error naming file and byte position, SRC untouched, nothing at DST.
Also the metrics DataFrame a successful run returns."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest

import pipelines
from pipelines.config import JobConfig
from segment_io.errors import CorruptBatch, CrcMismatch
from segment_io.format.batch import build_v2_batch
from segment_io.format.constants import Codec
from segment_io.layout import META_DIR
from segment_io.segment.scan import scan_buffer
from tests.helpers import v2_batch, write_log

pytestmark = pytest.mark.spark

NOW = 1_701_000_000_000
COMPACT = JobConfig.build({"cleanup.policy": "compact", "segpipe.last.segment.sealed": True})


def fingerprint(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file()
    }


def assert_nothing_published(dst: Path) -> None:
    assert not dst.exists()
    assert [p.name for p in dst.parent.iterdir() if "segpipe-staging" in p.name] == []


def test_crc_mismatch_stops_the_run_with_file_and_position(spark, sample_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    shutil.copytree(sample_dir, src)
    log = src / "orders-0" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    table = scan_buffer(str(log), 0, np.frombuffer(bytes(data), dtype=np.uint8)).table
    third = int(table.position[2])
    data[third + 70] ^= 0xFF  # inside the third batch's records: its CRC no longer matches
    log.write_bytes(bytes(data))
    before = fingerprint(src)
    dst = tmp_path / "out"
    with pytest.raises(CrcMismatch) as caught:
        pipelines.clean(spark, str(src), str(dst), COMPACT, now_ms=NOW)
    assert caught.value.path.endswith("orders-0/00000000000000000000.log")
    assert caught.value.position == third
    assert fingerprint(src) == before
    assert_nothing_published(dst)


def test_undecodable_records_found_by_a_worker_keep_their_type(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A zstd batch with a valid CRC but a payload that does not decode: only a worker that
    decompresses it can tell; the driver still raises CorruptBatch at that batch."""
    good = v2_batch(0, [(0, NOW - 10, b"k", b"v", [])])
    bad = build_v2_batch(
        base_offset=1,
        records=b"\x28\xb5\x2f\xfd not a zstd frame",
        records_count=1,
        last_offset_delta=0,
        base_timestamp=NOW - 5,
        max_timestamp=NOW - 5,
        attributes=int(Codec.ZSTD),
    )
    src = tmp_path / "src"
    write_log(src, "t-0", [[good, bad]])
    dst = tmp_path / "out"
    with pytest.raises(CorruptBatch) as caught:
        pipelines.clean(spark, str(src), str(dst), COMPACT, now_ms=NOW)
    assert caught.value.path.endswith("t-0/00000000000000000000.log")
    assert caught.value.position == len(good)
    assert "zstd" in caught.value.detail
    assert_nothing_published(dst)


def test_metrics_dataframe_has_one_row_per_partition(spark, sample_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    config = JobConfig.build({"retention.ms": -1}, {"orders": {"cleanup.policy": "compact"}})
    report = pipelines.clean(spark, str(sample_dir), str(tmp_path / "out"), config, now_ms=NOW)
    df = report.to_dataframe(spark)
    rows = {r["partition"]: r for r in df.collect()}
    assert set(rows) == {"clicks-0", "legacy-users-0", "orders-0", "orders-1"}
    for p in report.partitions:
        assert rows[p.partition]["records_in"] == p.records_in
        assert rows[p.partition]["records_out"] == p.records_out
    assert rows["orders-0"]["records_out"] < rows["orders-0"]["records_in"]
    assert rows["clicks-0"]["cleaned_up_to"] is None  # delete policy: retention only


def test_a_source_without_partitions_gives_an_empty_output_and_says_so(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "src").mkdir()
    said: list[str] = []
    report = pipelines.clean(
        spark, str(tmp_path / "src"), str(tmp_path / "out"), COMPACT, now_ms=NOW, log=said.append
    )
    assert report.partitions == []
    assert [p.name for p in (tmp_path / "out").iterdir()] == [META_DIR]
    assert said and "no partition directories in" in said[0]
