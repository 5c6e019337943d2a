"""The key map's hash table: exact keys, latest offset per (partition, key), whatever the hash."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.jobs.clean.keymap import Survivors
from pipelines.log.keytable import KeyRows, LatestOffsets, hash_keys

pytestmark = pytest.mark.unit


def _rows(keys: list[bytes], tps: list[int], offsets: list[int], hashes: np.ndarray | None = None) -> KeyRows:
    data = np.frombuffer(b"".join(keys) or b"\0", dtype=np.uint8)
    lengths = np.array([len(k) for k in keys], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if keys else lengths
    tp = np.array(tps, dtype=np.int32)
    h = hash_keys(tp, data, starts, lengths) if hashes is None else hashes
    return KeyRows(tp, h, data, starts, lengths, np.array(offsets, dtype=np.int64))


def _as_dict(rows: KeyRows) -> dict[tuple[int, bytes], int]:
    return {
        (int(rows.tp[i]), rows.data[rows.starts[i] : rows.starts[i] + rows.lengths[i]].tobytes()): int(
            rows.offset[i]
        )
        for i in range(len(rows))
    }


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.binary(max_size=6), st.integers(0, 10**12)), max_size=300),
    st.integers(1, 4),
)
def test_latest_offset_per_partition_and_key_matches_a_dict(
    entries: list[tuple[int, bytes, int]], blocks: int
) -> None:
    table = LatestOffsets()
    for part in np.array_split(np.arange(len(entries)), blocks):
        chosen = [entries[i] for i in part]
        table.add(_rows([k for _, k, _ in chosen], [t for t, _, _ in chosen], [o for _, _, o in chosen]))
    expected: dict[tuple[int, bytes], int] = {}
    for tp, key, offset in entries:
        expected[(tp, key)] = max(offset, expected.get((tp, key), -1))
    assert _as_dict(table.rows()) == expected
    probe = _rows(
        [b"absent-key"] + [k for _, k, _ in entries],
        [0] + [t for t, _, _ in entries],
        [0] * (len(entries) + 1),
    )
    found = table.contains(probe)
    assert not found[0] and found[1:].all()


def test_keys_with_the_same_hash_are_never_merged() -> None:
    keys = [b"alpha", b"beta", b"alpha", b"gamma", b"beta"]
    same = np.full(len(keys), 42, dtype=np.uint64)  # every key collides
    table = LatestOffsets()
    table.add(_rows(keys, [0, 0, 0, 0, 1], [1, 2, 3, 4, 5], same))
    assert _as_dict(table.rows()) == {(0, b"alpha"): 3, (0, b"beta"): 2, (0, b"gamma"): 4, (1, b"beta"): 5}
    assert table.contains(
        _rows([b"delta", b"beta"], [0, 1], [0, 0], np.full(2, 42, dtype=np.uint64))
    ).tolist() == [
        False,
        True,
    ]


def test_take_packs_the_selected_keys() -> None:
    rows = _rows([b"a", b"bb", b"ccc"], [0, 1, 2], [7, 8, 9])
    taken = rows.take(np.array([2, 0]))
    assert _as_dict(taken) == {(2, b"ccc"): 9, (0, b"a"): 7}
    assert len(taken.data) == 4
    assert _as_dict(KeyRows.concat([taken, rows.take(np.array([1]))])) == {
        (2, b"ccc"): 9,
        (0, b"a"): 7,
        (1, b"bb"): 8,
    }


def _listed(rows: KeyRows) -> list[tuple[int, int, bytes, int]]:
    """Every row in order, with its key's bytes."""
    return [
        (
            int(rows.tp[i]),
            int(rows.hash[i]),
            rows.data[rows.starts[i] : rows.starts[i] + rows.lengths[i]].tobytes(),
            int(rows.offset[i]),
        )
        for i in range(len(rows))
    ]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=200), st.integers(1, 7), st.integers(1, 9))
def test_rows_by_bucket_are_a_stable_sort_by_bucket_sliced_into_items(
    keys: list[bytes], buckets: int, item_rows: int
) -> None:
    """The bucketing kernel lays rows out as a stable sort by bucket followed by `take` would, and
    its slices hold exactly their rows' keys."""
    rows = _rows(keys, [i % 3 for i in range(len(keys))], list(range(len(keys))))
    bucket = (rows.hash % np.uint64(buckets)).astype(np.int64)
    ordered, edges = rows.by_bucket(bucket, buckets)
    order = np.argsort(bucket, kind="stable")
    assert _listed(ordered) == _listed(rows.take(order))
    assert edges.tolist() == np.searchsorted(bucket[order], np.arange(buckets + 1)).tolist()
    for b in range(buckets):
        for lo in range(int(edges[b]), int(edges[b + 1]), item_rows):
            hi = min(lo + item_rows, int(edges[b + 1]))
            piece = ordered.slice(lo, hi)
            assert _listed(piece) == _listed(rows.take(order[lo:hi]))
            assert len(piece.data) == sum(len(k) for k in np.array(keys, dtype=object)[order[lo:hi]])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 5000), max_size=200), max_size=5),
    st.lists(st.tuples(st.integers(-1, 5100), st.integers(0, 60)), max_size=50),
)
def test_survivors_answer_like_a_set_as_arrays_or_as_a_bitmap(
    blocks: list[list[int]], ranges: list[tuple[int, int]]
) -> None:
    kept = Survivors()
    for block in blocks:
        kept.add(np.array(block, dtype=np.int32))
    expected = {v for block in blocks for v in block}
    probe = np.arange(-1, 5101, dtype=np.int32)
    assert kept.contains(probe).tolist() == [int(v) in expected for v in probe]
    lo = np.array([a for a, _ in ranges], dtype=np.int32)
    hi = lo + np.array([n for _, n in ranges], dtype=np.int32)
    assert kept.count_in(lo, hi).tolist() == [
        sum(v in expected for v in range(a, a + n + 1)) for a, n in ranges
    ]


def test_dense_survivors_fold_into_a_bitmap() -> None:
    kept = Survivors()
    kept.add(np.arange(0, 100_000, 3, dtype=np.int32))
    assert kept._bits is not None and len(kept._bits) <= 100_000 // 8 + 1
    sparse = Survivors()
    sparse.add(np.array([5, 2_000_000_000], dtype=np.int32))
    assert sparse._bits is None and sparse.contains(np.array([5, 6, 2_000_000_000])).tolist() == [
        True,
        False,
        True,
    ]


def test_map_side_dedupe_stops_where_keys_barely_repeat(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Past the probe, a map task whose keys were nearly all distinct ships its dirty rows as they
    are; the latest offset per key after the reduce side's dedupe is the same either way."""
    from pipelines.jobs.clean.keymap import KeyTask, extract_keys
    from segment_io.layout import list_log_dir
    from segment_io.storage import open_storage
    from tests.helpers import v2_batch, write_log

    keys = [b"d%d" % i for i in range(300)] + [b"hot%d" % (i % 3) for i in range(300)]
    value = b"v" * 10_000  # about 100 records per 1 MB chunk: the probe sees the first chunk
    batches = [
        v2_batch(b * 20, [(i, 1_700_000_000_000, keys[b * 20 + i], value, []) for i in range(20)])
        for b in range(len(keys) // 20)
    ]
    write_log(tmp_path, "t-0", [batches])
    storage, root = open_storage(str(tmp_path))
    files = list_log_dir(storage, root).partitions[0].segments[0]
    task = KeyTask(0, 0, root, files, np.arange(len(batches)), 0, len(keys))
    latest = {k: 2 * o for o, k in enumerate(keys)}  # tagged offsets: offset · 2, no tombstones
    for probe, shipped in ((100, len(keys)), (10**9, 303)):
        dirty = KeyRows.concat([d for d, _ in extract_keys([task], {}, probe_rows=probe)])
        assert len(dirty) == shipped
        table = LatestOffsets()
        table.add(dirty)
        assert {k: o for (_, k), o in _as_dict(table.rows()).items()} == latest
