"""Reading a range through the sparse indexes (segment_io.segment.ranges): for any offset and time
range, the records read through the segments' windows are exactly the records of a whole read that
fall in the range, for every codec, CreateTime out of order and LogAppendTime, across segment
boundaries; windows really are smaller; missing or wrong indexes give the whole file, with a note."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segment_io.format.constants import DEFAULT_INDEX_INTERVAL_BYTES
from segment_io.generate import generate_log_dir
from segment_io.generate_spec import TopicSpec
from segment_io.layout import PartitionListing, list_log_dir
from segment_io.segment.arrow import RECORD_SCHEMA
from segment_io.segment.list_offsets import offset_for_time
from segment_io.segment.ranges import RecordRange, segment_window
from segment_io.segment.reader import SegmentReader
from segment_io.storage import open_storage
from tests.helpers import v2_batch, write_log

pytestmark = pytest.mark.unit

SPECS = [
    # index.interval.bytes is Kafka's 4096: segments of 48 KiB hold a dozen index entries each.
    TopicSpec(
        "created",
        partitions=1,
        records=3000,
        records_per_batch=(1, 20),
        segment_bytes=48 * 1024,
        span_ms=3_600_000,
    ),
    TopicSpec(
        "appended",
        records=2000,
        log_append_time=True,
        codecs=("zstd", "none"),
        segment_bytes=40 * 1024,
        span_ms=3_600_000,
    ),
]


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ranges") / "log"
    storage, path = open_storage(str(root))
    generate_log_dir(storage, path, SPECS, seed=5)
    return root


def partitions(root: Path) -> list[PartitionListing]:
    storage, path = open_storage(str(root))
    return list(list_log_dir(storage, path).partitions)


def read(root: Path, want: RecordRange | None, windowed: bool) -> tuple[pa.Table, int, list[str]]:
    """Every record of the log in `want` (None: all), through windows or whole files; the bytes
    the windows span, and their notes."""
    storage, _ = open_storage(str(root))
    tables, spanned, notes = [], 0, []
    for part in partitions(root):
        for i, files in enumerate(part.segments):
            next_base = part.segments[i + 1].base_offset if i + 1 < len(part.segments) else None
            window = segment_window(storage, files, next_base, want or RecordRange()) if windowed else None
            if windowed and window is None:
                continue
            if window is not None:
                spanned += window.end - window.start
                notes += [window.note] if window.note else []
            reader = SegmentReader(storage, files.log.path, files.base_offset, window)
            rows = reader.record_batches(part.tp.topic, part.tp.partition, want=want if windowed else None)
            tables += list(rows)
    table = pa.Table.from_batches(tables, schema=RECORD_SCHEMA)
    if not windowed and want is not None:
        table = pa.Table.from_batches([want.filter(b) for b in table.to_batches()], schema=RECORD_SCHEMA)
    return table, spanned, notes


def rows(table: pa.Table) -> list[tuple[object, ...]]:
    cols = ("topic", "partition", "offset", "timestamp", "key", "value", "batch_position")
    return sorted(zip(*(table.column(c).to_pylist() for c in cols), strict=True))


def bounds(root: Path) -> tuple[int, int, int, int]:
    whole, _, _ = read(root, None, windowed=False)
    offsets, times = whole.column("offset").to_pylist(), whole.column("timestamp").to_pylist()
    return min(offsets), max(offsets), min(times), max(times)


@st.composite
def ranges(draw: st.DrawFn, limits: tuple[int, int, int, int]) -> RecordRange:
    lo, hi, tlo, thi = limits

    def maybe(low: int, high: int) -> int | None:
        return draw(st.none() | st.integers(low - 5, high + 5))

    return RecordRange(maybe(lo, hi), maybe(lo, hi), maybe(tlo, thi), maybe(tlo, thi))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_windows_read_exactly_the_range(log: Path, data: st.DataObject) -> None:
    want = data.draw(ranges(bounds(log)))
    expected, _, _ = read(log, want, windowed=False)
    got, _, notes = read(log, want, windowed=True)
    assert notes == []
    assert rows(got) == rows(expected)


def test_out_of_order_create_times_are_all_found(log: Path) -> None:
    """A time range whose records sit behind newer ones: the read still finds every one of them."""
    whole, _, _ = read(log, None, windowed=False)
    created = whole.filter(pa.compute.equal(whole.column("topic"), "created"))
    times = created.column("timestamp").to_pylist()
    late = next(i for i in range(1, len(times)) if times[i] < times[i - 1])  # older than the one before
    want = RecordRange(from_time=times[late], to_time=times[late])
    got, _, _ = read(log, want, windowed=True)
    assert created.column("offset")[late].as_py() in got.column("offset").to_pylist()
    assert rows(got) == rows(read(log, want, windowed=False)[0])


def test_windows_span_a_small_part_of_the_log(log: Path) -> None:
    lo, hi, tlo, thi = bounds(log)
    size = sum(f.size for p in partitions(log) for f in p.segments)
    middle = (lo + hi) // 2
    _, spanned, _ = read(log, RecordRange(from_offset=middle, to_offset=middle + 20), windowed=True)
    assert 0 < spanned < size / 10
    _, spanned, _ = read(log, RecordRange(from_time=thi - (thi - tlo) // 20), windowed=True)
    assert 0 < spanned < size / 4


@pytest.mark.parametrize("damage", ["missing", "wrong"])
def test_unusable_indexes_read_the_whole_file_with_a_note(log: Path, tmp_path: Path, damage: str) -> None:
    copy = tmp_path / "log"
    shutil.copytree(log, copy)
    first = next(p for p in partitions(copy) if p.tp.topic == "created").segments[0]
    assert first.index is not None
    index = Path(first.index.path)
    data = bytearray(index.read_bytes())
    relative = int.from_bytes(data[8:12], "big")  # the second entry's offset, less the base
    want = RecordRange(
        from_offset=first.base_offset + relative + 1, to_offset=first.base_offset + relative + 3
    )
    if damage == "missing":
        index.unlink()
    else:  # the second entry claims its batch ends one offset later than it does
        data[8:12] = (relative + 1).to_bytes(4, "big")
        index.write_bytes(bytes(data))
    got, _, notes = read(copy, want, windowed=True)
    assert len(notes) == 1, notes
    assert ("no .index" if damage == "missing" else f"no batch ending at offset {want.from_offset}") in notes[
        0
    ]
    assert len(got) and rows(got) == rows(read(log, want, windowed=False)[0])


def test_a_range_that_holds_nothing_reads_nothing(log: Path) -> None:
    storage, _ = open_storage(str(log))
    files = partitions(log)[0].segments[0]
    assert segment_window(storage, files, None, RecordRange(from_offset=10, to_offset=9)) is None
    assert segment_window(storage, files, None, RecordRange(from_time=2**62)) is None


def list_offsets_by_hand(
    segments: list[tuple[int, list[tuple[int, int]]]], timestamp: int, log_start: int = 0
) -> int | None:
    """Kafka's ListOffsets stated plainly, over (largest timestamp, records) per segment: the first
    segment whose largest timestamp is at or after the time, and in it only, the first record in
    offset order at or after both the time and the log start."""
    for largest, rows in segments:
        if largest >= timestamp:
            return next((o for o, t in sorted(rows) if t >= timestamp and o >= log_start), None)
    return None


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_offset_for_time_is_kafkas_list_offsets(log: Path, data: st.DataObject) -> None:
    storage, _ = open_storage(str(log))
    _, _, tlo, thi = bounds(log)
    at = data.draw(st.integers(tlo - 10, thi + 10))
    for part in partitions(log):
        whole = read(log, None, windowed=False)[0]
        mine = pa.compute.equal(whole.column("topic"), part.tp.topic)
        cols = ("segment_base_offset", "offset", "timestamp")
        rows = list(zip(*(whole.filter(mine).column(c).to_pylist() for c in cols), strict=True))
        by_segment: dict[int, list[tuple[int, int]]] = {}
        for base, offset, ts in rows:
            by_segment.setdefault(base, []).append((offset, ts))
        segments = [(max(t for _, t in seg), seg) for _, seg in sorted(by_segment.items())]
        start = data.draw(st.sampled_from([0, rows[len(rows) // 2][1]]))
        found = offset_for_time(storage, part.segments, at, start)
        expected = list_offsets_by_hand(segments, at, start)
        assert (None if found is None else found.offset) == expected
        assert found is None or found.timestamp == {o: t for _, o, t in rows}[found.offset]


def test_offset_for_time_with_ties_out_of_order_times_and_an_empty_segment(tmp_path: Path) -> None:
    """Hand-built: equal timestamps (the first offset wins), a record older than the one before it
    (found after a newer one), an empty segment between (its file time its largest timestamp), a
    newest record that is not the last; only the first segment new enough is searched."""
    batches = [
        [v2_batch(0, [(0, 100, b"a", b"1", []), (1, 300, b"b", b"2", []), (2, 200, b"c", b"3", [])])],
        [],  # an empty segment at offset 3
        [
            v2_batch(3, [(0, 300, b"d", b"4", []), (1, 150, b"e", b"5", [])]),
            v2_batch(5, [(0, 500, b"f", b"6", []), (1, 400, b"g", b"7", [])]),
        ],
    ]
    write_log(tmp_path, "t-0", batches)
    # The empty segment has no timestamp: Kafka takes its file's modification time (here 350 ms)
    # as its largest, so a time past the first segment's largest (300) and up to 350 stops there,
    # with no offset.
    os.utime(tmp_path / "t-0" / f"{3:020d}.log", (0.35, 0.35))
    storage, path = open_storage(str(tmp_path))
    [part] = list_log_dir(storage, path).partitions
    segments = [
        (300, [(0, 100), (1, 300), (2, 200)]),
        (250, []),
        (500, [(3, 300), (4, 150), (5, 500), (6, 400)]),
    ]
    for at in (0, 100, 101, 150, 200, 201, 250, 251, 300, 301, 400, 450, 500, 501):
        for start in (0, 2, 4):
            found = offset_for_time(storage, part.segments, at, start)
            assert (None if found is None else found.offset) == list_offsets_by_hand(segments, at, start), (
                at,
                start,
            )


def test_one_offset_reads_one_index_and_one_batch(log: Path) -> None:
    """A lookup of one offset: the segments around it unread, and in its own a window of about one
    index interval, in which only the batch with that offset is decoded (where batches are larger
    than the interval, as in the bench set, the window is that batch alone)."""
    storage, _ = open_storage(str(log))
    part = next(p for p in partitions(log) if p.tp.topic == "created")
    whole, _, _ = read(log, None, windowed=False)
    offsets = [
        o
        for o, t in zip(whole.column("offset").to_pylist(), whole.column("topic").to_pylist(), strict=True)
        if t == "created"
    ]
    for offset in offsets[:: len(offsets) // 25]:
        want = RecordRange(from_offset=offset, to_offset=offset)
        windows = [
            segment_window(
                storage, f, part.segments[i + 1].base_offset if i + 1 < len(part.segments) else None, want
            )
            for i, f in enumerate(part.segments)
        ]
        [(files, window)] = [(f, w) for f, w in zip(part.segments, windows, strict=True) if w is not None]
        assert window is not None and window.note is None
        table = SegmentReader(storage, files.log.path, files.base_offset, window).scan().table
        [decoded] = np.flatnonzero(want.batch_mask(table))
        assert table.base_offset[decoded] <= offset <= table.last_offset[decoded]
        assert window.end - window.start <= 2 * DEFAULT_INDEX_INTERVAL_BYTES + int(table.size.max()), offset


def test_the_active_segments_time_index_is_not_taken_for_its_largest_timestamp(
    log: Path, tmp_path: Path
) -> None:
    """The last segment's time index without its final entries (a broker stopped before it
    appended them): a time range beyond what the index holds still finds that segment's records."""
    copy = tmp_path / "log"
    shutil.copytree(log, copy)
    last = next(p for p in partitions(copy) if p.tp.topic == "created").segments[-1]
    assert last.timeindex is not None
    timeindex = Path(last.timeindex.path)
    entries = timeindex.read_bytes()
    assert len(entries) >= 24
    timeindex.write_bytes(entries[:12])  # only the first entry left
    stale = int.from_bytes(entries[:8], "big")
    want = RecordRange(from_time=stale + 1)
    got, _, _ = read(copy, want, windowed=True)
    expected = read(log, want, windowed=False)[0]
    assert len(expected) and rows(got) == rows(expected)
