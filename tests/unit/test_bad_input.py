"""Every kind of bad input gives a typed error naming the file and the byte position."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

from segment_io.errors import (
    BadLength,
    BadSegmentName,
    CorruptBatch,
    CorruptCheckpoint,
    CorruptIndex,
    CrcMismatch,
    LogDirNotFound,
    OverlappingSegments,
    SegmentError,
    UnknownMagic,
    UnsupportedCodec,
)
from segment_io.exit_codes import ExitCode
from segment_io.format.constants import Codec
from segment_io.layout import list_log_dir
from segment_io.partition import inspect_partition, scan_partition
from segment_io.segment.reader import SegmentReader
from segment_io.storage import open_storage
from tests.helpers import v2_batch, write_segment

pytestmark = pytest.mark.unit
TS = 1_700_000_000_000


def two_batches(codec: Codec = Codec.NONE) -> tuple[bytes, bytes]:
    a = v2_batch(0, [(0, TS, b"a", b"1" * 50, []), (1, TS, b"b", b"2", [])], codec=codec)
    b = v2_batch(2, [(0, TS + 1, b"c", b"3" * 50, [])], codec=codec)
    return a, b


def reader_for(path: Path, base: int = 0) -> SegmentReader:
    storage, p = open_storage(str(path))
    return SegmentReader(storage, p, base)


def deep(reader: SegmentReader) -> list[dict]:
    return [row for rb in reader.record_batches("t", 0) for row in rb.to_pylist()]


def test_truncated_tail_is_reported_where_kafka_would_truncate(tmp_path: Path) -> None:
    a, b = two_batches()
    path = write_segment(tmp_path / "t-0", 0, a + b[:40])
    scan = reader_for(path).scan()
    assert scan.tail is not None and scan.tail.position == len(a) and scan.tail.path == str(path)
    assert scan.valid_size == len(a) and len(scan.table) == 1
    assert "truncates the file to" in str(scan.tail)


def test_short_tail_under_header_size_is_also_a_partial_batch(tmp_path: Path) -> None:
    a, _ = two_batches()
    scan = reader_for(write_segment(tmp_path / "t-0", 0, a + b"\x00" * 10)).scan()
    assert scan.tail is not None and scan.tail.position == len(a)


def test_bad_crc(tmp_path: Path) -> None:
    a, b = two_batches()
    bad = bytearray(b)
    bad[-1] ^= 0xFF
    reader = reader_for(write_segment(tmp_path / "t-0", 0, a + bytes(bad)))
    with pytest.raises(CrcMismatch) as err:
        reader.verify_crcs()
    assert err.value.position == len(a) and err.value.path.endswith("00000000000000000000.log")


@pytest.mark.parametrize("native", [True, False])
def test_the_first_bad_crc_in_the_file_is_named_with_or_without_the_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, native: bool
) -> None:
    import segment_io.segment.scan as segment
    from segment_io.format.batch import build_legacy_message
    from segment_io.format.checksums import NATIVE_CRC32C

    if native and not NATIVE_CRC32C:
        pytest.fail("this machine's crc32c package should have its hardware function")
    monkeypatch.setattr(segment, "NATIVE_CRC32C", native)
    a, b = two_batches(Codec.LZ4)
    legacy = build_legacy_message(3, 1, 0, TS, b"k", b"v" * 30)
    good = a + legacy + b
    reader_for(write_segment(tmp_path / "ok-0", 0, good)).verify_crcs()  # nothing raises

    def damaged(*at: int) -> bytes:
        data = bytearray(good)
        for i in at:
            data[i] ^= 0xFF
        return bytes(data)

    last_v2, legacy_at = len(a) + len(legacy), len(a)
    for flipped, position in [
        ((len(good) - 1,), last_v2),  # a v2 batch: the kernel finds it
        ((legacy_at + 30,), legacy_at),  # a legacy entry: the per-batch path finds it
        ((legacy_at + 30, len(good) - 1), legacy_at),  # both: the earlier one is named
        ((len(a) - 1, legacy_at + 30), 0),
    ]:
        reader = reader_for(write_segment(tmp_path / f"t{position}{len(flipped)}-0", 0, damaged(*flipped)))
        with pytest.raises(CrcMismatch, match="stored 0x") as err:
            reader.verify_crcs()
        assert err.value.position == position


def test_zero_filled_tail_is_a_bad_length(tmp_path: Path) -> None:
    a, _ = two_batches()
    reader = reader_for(write_segment(tmp_path / "t-0", 0, a + b"\x00" * 4096))
    with pytest.raises(BadLength) as err:
        reader.scan()
    assert err.value.position == len(a)


def test_bad_length_of_v2_batch(tmp_path: Path) -> None:
    a, b = two_batches()
    bad = bytearray(b)
    struct.pack_into(">i", bad, 8, 30)  # ≥ 14 but below a v2 header
    with pytest.raises(BadLength) as err:
        reader_for(write_segment(tmp_path / "t-0", 0, a + bytes(bad))).scan()
    assert err.value.position == len(a)


def test_unknown_magic(tmp_path: Path) -> None:
    a, b = two_batches()
    bad = bytearray(b)
    bad[16] = 7
    with pytest.raises(UnknownMagic) as err:
        reader_for(write_segment(tmp_path / "t-0", 0, a + bytes(bad))).scan()
    assert err.value.position == len(a)


def test_unsupported_codec(tmp_path: Path) -> None:
    a, b = two_batches()
    bad = bytearray(b)
    bad[22] = (bad[22] & ~0x07) | 5
    with pytest.raises(UnsupportedCodec) as err:
        reader_for(write_segment(tmp_path / "t-0", 0, a + bytes(bad))).scan()
    assert err.value.position == len(a)


def test_record_longer_than_its_batch(tmp_path: Path) -> None:
    a, b = two_batches()
    bad = bytearray(b)
    bad[61] = 0x7E  # record length varint 63, far past the end of the batch
    reader = reader_for(write_segment(tmp_path / "t-0", 0, a + bytes(bad)))
    with pytest.raises(CorruptBatch) as err:
        deep(reader)
    assert err.value.position == len(a) + 61
    assert "exceeds the remaining bytes" in err.value.detail


def test_records_count_larger_than_records(tmp_path: Path) -> None:
    a, _ = two_batches()
    bad = bytearray(a)
    struct.pack_into(">i", bad, 57, 3)
    with pytest.raises(CorruptBatch) as err:
        deep(reader_for(write_segment(tmp_path / "t-0", 0, bytes(bad))))
    assert err.value.position is not None and err.value.position >= 61


def test_corrupt_compressed_stream(tmp_path: Path) -> None:
    a, b = two_batches(Codec.ZSTD)
    bad = bytearray(b)
    bad[61:65] = b"\x00\x00\x00\x00"
    reader = reader_for(write_segment(tmp_path / "t-0", 0, a + bytes(bad)))
    with pytest.raises(CorruptBatch) as err:
        deep(reader)
    assert err.value.position == len(a) and "zstd" in err.value.detail


def test_overlapping_segments(tmp_path: Path) -> None:
    a, b = two_batches()
    write_segment(tmp_path / "t-0", 0, a + b)
    write_segment(tmp_path / "t-0", 1, b)  # offsets 0..2 of the first segment reach base 1
    storage, path = open_storage(str(tmp_path))
    listing = list_log_dir(storage, path)
    with pytest.raises(OverlappingSegments) as err:
        scan_partition(storage, listing.partitions[0])
    assert err.value.path.endswith("00000000000000000000.log") and err.value.position == 0


def test_batch_below_its_segment_base(tmp_path: Path) -> None:
    a, _ = two_batches()
    write_segment(tmp_path / "t-0", 5, a)
    storage, path = open_storage(str(tmp_path))
    with pytest.raises(OverlappingSegments, match="below the segment base offset 5"):
        scan_partition(storage, list_log_dir(storage, path).partitions[0])


def test_misnamed_segment(tmp_path: Path) -> None:
    (tmp_path / "t-0").mkdir()
    (tmp_path / "t-0" / "123.log").write_bytes(b"")
    storage, path = open_storage(str(tmp_path))
    with pytest.raises(BadSegmentName) as err:
        list_log_dir(storage, path)
    assert err.value.path.endswith("123.log")


def test_index_pointing_outside_the_log(tmp_path: Path) -> None:
    a, b = two_batches()
    log = write_segment(tmp_path / "t-0", 0, a + b)
    log.with_suffix(".index").write_bytes(struct.pack(">ii", 2, 10_000))
    storage, path = open_storage(str(tmp_path))
    report = inspect_partition(storage, list_log_dir(storage, path).partitions[0])
    assert not report.ok
    [err] = report.errors
    assert isinstance(err, CorruptIndex) and err.position == 0 and err.path.endswith(".index")
    assert "outside the log" in err.detail


def test_index_entry_not_at_a_batch_start(tmp_path: Path) -> None:
    a, b = two_batches()
    log = write_segment(tmp_path / "t-0", 0, a + b)
    log.with_suffix(".index").write_bytes(struct.pack(">ii", 2, len(a) + 3))
    storage, path = open_storage(str(tmp_path))
    [err] = inspect_partition(storage, list_log_dir(storage, path).partitions[0]).errors
    assert isinstance(err, CorruptIndex) and "not the start of a batch" in err.detail


@pytest.mark.parametrize(("suffix", "entry"), [(".index", 8), (".timeindex", 12)])
def test_an_index_of_a_partial_entry_is_corrupt(tmp_path: Path, suffix: str, entry: int) -> None:
    """Kafka's sanity check: an index is a whole number of entries (a truncated copy is not)."""
    a, b = two_batches()
    log = write_segment(tmp_path / "t-0", 0, a + b)
    log.with_suffix(suffix).write_bytes(bytes(entry + 3))
    storage, path = open_storage(str(tmp_path))
    [err] = inspect_partition(storage, list_log_dir(storage, path).partitions[0]).errors
    assert isinstance(err, CorruptIndex) and err.path.endswith(suffix) and err.position == entry
    assert f"not a whole number of {entry}-byte entries" in err.detail


def test_zero_length_log_is_an_empty_segment_not_an_error(tmp_path: Path) -> None:
    write_segment(tmp_path / "t-0", 0, b"")
    storage, path = open_storage(str(tmp_path))
    report = inspect_partition(storage, list_log_dir(storage, path).partitions[0])
    assert report.ok and report.segments[0].batches == 0


def test_zero_length_checkpoint_is_empty_and_a_bad_version_is_refused(tmp_path: Path) -> None:
    # A broker creates its checkpoint files empty and reads an empty one as no entries (its
    # CheckpointFile reader returns an empty list at end of file): so does segpipe.
    (tmp_path / "replication-offset-checkpoint").write_bytes(b"")
    storage, path = open_storage(str(tmp_path))
    assert list_log_dir(storage, path).checkpoints["replication-offset-checkpoint"] == {}
    (tmp_path / "replication-offset-checkpoint").write_bytes(b"7\n")
    with pytest.raises(CorruptCheckpoint) as err:
        list_log_dir(storage, path)
    assert err.value.path.endswith("replication-offset-checkpoint") and err.value.position == 0


@pytest.mark.parametrize("command", ["inspect", "dump"])
def test_cli_reports_bad_data_without_traceback(tmp_path: Path, command: str) -> None:
    a, b = two_batches()
    bad = bytearray(b)
    bad[-1] ^= 0xFF
    write_segment(tmp_path / "t-0", 0, a + bytes(bad))
    proc = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", command, str(tmp_path)], capture_output=True, text=True
    )
    assert proc.returncode != ExitCode.OK
    assert "Traceback" not in proc.stderr
    out = proc.stdout + proc.stderr
    assert "CRC mismatch" in out and f"at byte {len(a)}" in out and "00000000000000000000.log" in out


def test_every_error_is_a_segment_error() -> None:
    for cls in (BadLength, CrcMismatch, UnknownMagic, UnsupportedCodec, CorruptIndex, BadSegmentName):
        assert issubclass(cls, SegmentError)


def test_missing_log_dir_is_an_error_not_an_empty_log(tmp_path: Path) -> None:
    storage, path = open_storage(str(tmp_path / "typo"))
    with pytest.raises(LogDirNotFound) as caught:
        list_log_dir(storage, path)
    assert caught.value.path == path and caught.value.position is None


def test_segment_errors_survive_pickling_and_their_own_text() -> None:
    """Errors raised in Spark workers reach the driver pickled or as text; both keep the fields."""
    import pickle

    err = CrcMismatch("/data/t-0/00000000000000000000.log", 4096, "stored 0x1, computed 0x2")
    again = pickle.loads(pickle.dumps(err))
    assert (type(again), again.path, again.position, again.detail) == (
        CrcMismatch,
        err.path,
        4096,
        err.detail,
    )
    parsed = CrcMismatch.from_message(str(err))
    assert (parsed.path, parsed.position, parsed.detail) == (err.path, 4096, err.detail)
    missing = LogDirNotFound.from_message(str(LogDirNotFound("s3://b/logs", None, "no such directory")))
    assert (missing.path, missing.position, missing.detail) == ("s3://b/logs", None, "no such directory")
