"""Mutated real segments and indexes (bit flips, truncations, spliced ranges, overwritten length
and count fields) fed to what inspect, dump and clean's scan run: the only acceptable outcomes are output or
a typed SegmentError naming the file and a byte position inside it — never another exception,
a hang or a huge allocation. Checked with CRCs on and off (off lets damage reach the parsers)."""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.log.scan import scan_segment
from segment_io.errors import SegmentError
from segment_io.layout import list_log_dir
from segment_io.partition import inspect_partition
from segment_io.segment.reader import SegmentReader
from segment_io.storage import open_storage

pytestmark = pytest.mark.unit
SAMPLES = Path(__file__).resolve().parents[2] / "data" / "samples"
# One segment of each kind: v2 with every codec and transactions, legacy magic 0/1 wrappers.
SEGMENTS = sorted(SAMPLES.glob("*-0/0*.log"))


@st.composite
def mutations(draw: st.DrawFn) -> tuple[Path, str, bytes]:
    """(segment, which of its files, that file's mutated bytes)."""
    source = draw(st.sampled_from(SEGMENTS))
    suffix = draw(st.sampled_from([".log", ".log", ".index", ".timeindex"]))
    data = bytearray(source.with_suffix(suffix).read_bytes())
    starts = _batch_starts(bytes(data)) if suffix == ".log" else []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "truncate", "splice", "int32", "header"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "header" and starts:  # a length, count, delta or varint-bearing field of a batch
            at = draw(st.sampled_from(starts)) + draw(st.sampled_from([8, 23, 57, 61, 62, 63]))
            kind = "int32"
        if kind == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "truncate":
            del data[at:]
        elif kind == "splice" and data:
            end = draw(st.integers(at, len(data)))
            where = draw(st.integers(0, len(data)))
            data[where:where] = data[at:end]
        elif kind == "int32" and len(data) >= at + 4:
            value = draw(st.sampled_from([0, 1, -1, 13, 48, 2**31 - 1, -(2**31), 2**20, 0x7F7F7F7F]))
            data[at : at + 4] = struct.pack(">i", value)
    return source, suffix, bytes(data)


def _batch_starts(data: bytes) -> list[int]:
    out, pos = [], 0
    while pos + 12 <= len(data):
        out.append(pos)
        pos += 12 + max(struct.unpack_from(">i", data, pos + 8)[0], 1)
    return out


def _typed(exc: SegmentError, log: Path, size: int) -> None:
    """The error names one of the segment's files and, for the log itself, a byte inside it."""
    assert Path(exc.path).parent == log.parent and Path(exc.path).stem == log.stem, exc
    if exc.path == str(log):
        assert exc.position is None or 0 <= exc.position <= size, exc


@settings(
    max_examples=int(os.environ.get("SEGPIPE_FUZZ_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(mutations(), st.booleans())
def test_mutated_segments_read_or_fail_typed(
    tmp_path: Path, case: tuple[Path, str, bytes], crc: bool
) -> None:
    source, suffix, data = case
    part = tmp_path / "case" / source.parent.name
    shutil.rmtree(tmp_path / "case", ignore_errors=True)
    shutil.copytree(source.parent, part)
    for other in part.glob("0*.log"):
        if other.name != source.name:
            for sibling in part.glob(other.stem + ".*"):
                sibling.unlink()
    log = part / source.name
    log.with_suffix(suffix).write_bytes(data)
    storage, path = open_storage(str(part))
    [listing] = list_log_dir(storage, path).partitions
    report = inspect_partition(storage, listing, verify_crc=crc)
    size = log.stat().st_size
    for error in report.errors:
        _typed(error, log, size)
    reader = SegmentReader(storage, str(log), listing.segments[0].base_offset)
    try:  # dump's path
        if crc:
            reader.verify_crcs()
        rows = sum(batch.num_rows for batch in reader.record_batches(listing.tp.topic, listing.tp.partition))
        assert rows >= 0
    except SegmentError as exc:
        _typed(exc, log, size)
    try:  # clean's scan (it always checks CRCs)
        scan_segment(storage, listing.segments[0])
    except SegmentError as exc:
        _typed(exc, log, size)
