"""The key pass's cache of decoded records for the rewrite: fed the log backwards, it holds
exactly the last record of each key, byte for byte; past its budget it stops, and what it holds
stays among the survivors. The segments the key pass scanned are held for the rewrite too,
within a budget of their batches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipelines.jobs.clean import record_cache
from pipelines.jobs.clean.keymap import KeyTask, extract_keys
from pipelines.jobs.clean.record_cache import RecordCache
from segment_io.generate import generate_log_dir
from segment_io.generate_spec import TopicSpec
from segment_io.layout import list_partition
from segment_io.segment.reader import SegmentReader
from segment_io.storage import open_storage
from segment_io.topic_partition import TopicPartition
from tests.helpers import read_log

pytestmark = pytest.mark.unit

SPEC = TopicSpec(
    "t",
    records=3000,
    keys=300,
    key_skew=1.1,
    null_key_ratio=0.05,
    tombstone_ratio=0.1,
    transactional_ratio=0.0,
    codecs=("none", "lz4", "zstd", "snappy", "gzip"),
    segment_bytes=32 * 1024,
)


def _cache_of(root: Path, budget: int | None = None) -> tuple[RecordCache, list[KeyTask]]:
    storage, path = open_storage(str(root / "t-0"))
    listing = list_partition(storage, path, TopicPartition("t", 0))
    tasks = []
    for seg in listing.segments:
        table = SegmentReader(storage, seg.log.path, seg.base_offset).scan().table
        batches = np.flatnonzero(~table.is_control)
        tasks.append(
            KeyTask(0, 0, str(root / "t-0"), seg, batches, 0, int(table.records_count[batches].sum()))
        )
    cache = RecordCache(budget)
    for _ in extract_keys(tasks, {}, cache=cache):
        pass
    return cache, tasks


def _cached(cache: RecordCache, tasks: list[KeyTask]) -> dict[int, bytes | None]:
    """offset → value of every cached record."""
    out = {}
    for task in tasks:
        framed = cache.records(task.files.log.path, task.batches)
        data = framed.sections.data.tobytes()
        for off, start, length in zip(framed.offset, framed.value_start, framed.value_len, strict=True):
            out[int(off)] = None if length < 0 else data[start : start + length]
    return out


def test_the_cache_holds_the_last_record_of_each_key_byte_for_byte(tmp_path: Path) -> None:
    generate_log_dir(open_storage(str(tmp_path))[0], str(tmp_path), [SPEC])
    rows = [r for r in read_log(tmp_path, "t-0") if not r["is_control"]]
    last = {r["key"]: r for r in rows if r["key"] is not None}
    cache, tasks = _cache_of(tmp_path)
    assert len(tasks) > 3  # the pass goes backwards over several segments
    assert _cached(cache, tasks) == {r["offset"]: r["value"] for r in last.values()}


def test_past_its_budget_the_cache_stops_and_holds_only_survivors(tmp_path: Path) -> None:
    generate_log_dir(open_storage(str(tmp_path))[0], str(tmp_path), [SPEC])
    rows = [r for r in read_log(tmp_path, "t-0") if not r["is_control"]]
    survivors = {r["key"]: r["offset"] for r in rows if r["key"] is not None}
    cache, tasks = _cache_of(tmp_path, budget=0)
    held = _cached(cache, tasks)
    assert not cache.open and held  # one chunk's survivors, then nothing more
    assert set(held) < set(survivors.values())
    assert min(held) > rows[len(rows) // 2]["offset"]  # from the log's end: the pass went backwards


def test_the_scanned_segments_are_held_for_the_rewrite_within_a_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    generate_log_dir(open_storage(str(tmp_path))[0], str(tmp_path), [SPEC])
    cache, tasks = _cache_of(tmp_path)
    path = tasks[0].files.log.path
    reader = cache.take_reader(path)
    assert reader is not None and reader.path == path
    assert cache.take_reader(path) is None  # each segment is rewritten once: then let go
    last = cache.take_reader(tasks[-1].files.log.path)
    assert last is not None
    monkeypatch.setattr(record_cache, "READER_BATCHES", len(last.scan().table))
    cache, tasks = _cache_of(tmp_path)  # backwards: the last segment is held, then the budget is spent
    held = [t.files.log.path for t in tasks if cache.take_reader(t.files.log.path) is not None]
    assert len(held) == 1 and held[0] == tasks[-1].files.log.path
