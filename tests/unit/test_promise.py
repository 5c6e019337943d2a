"""The promise's per-partition arithmetic: which transactional records were aborted, and the
record digest that stands for key, value and headers."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from pipelines.jobs.validate.promise import _digests, aborted
from segment_io.segment.arrow import RECORD_SCHEMA
from segment_io.segment.digest import record_digests

pytestmark = pytest.mark.unit
COMMIT, ABORT = b"\x00\x00\x00\x01", b"\x00\x00\x00\x00"


def records(rows: list[tuple[int, bool, bool, bytes | None]]) -> dict[str, object]:
    """(producer, transactional, control, key) per record, in offset order."""
    return {
        "offset": np.arange(len(rows), dtype=np.int64),
        "producer_id": np.array([r[0] for r in rows], dtype=np.int64),
        "is_transactional": np.array([r[1] for r in rows]),
        "is_control": np.array([r[2] for r in rows]),
        "key": pa.array([r[3] for r in rows], pa.binary()),
    }


def test_a_record_is_aborted_when_its_producers_next_marker_aborts() -> None:
    rows = [
        (7, True, False, b"a"),  # 0: producer 7, committed at 3
        (8, True, False, b"b"),  # 1: producer 8, aborted at 4
        (9, False, False, b"c"),  # 2: not transactional
        (7, True, True, COMMIT),  # 3
        (8, True, True, ABORT),  # 4
        (7, True, False, b"d"),  # 5: producer 7 again, aborted at 6
        (7, True, True, ABORT),  # 6
        (8, True, False, b"e"),  # 7: producer 8, no marker yet: an open transaction
    ]
    assert np.flatnonzero(aborted(records(rows))).tolist() == [1, 5]


def batch(rows: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]]) -> pa.RecordBatch:
    headers = pa.array(
        [[{"key": k, "value": v} for k, v in h] for _, _, h in rows], RECORD_SCHEMA.field("headers").type
    )
    return pa.RecordBatch.from_arrays(
        [pa.array([r[0] for r in rows], pa.binary()), pa.array([r[1] for r in rows], pa.binary()), headers],
        names=["key", "value", "headers"],
    )


def test_the_digest_tells_apart_what_a_record_holds() -> None:
    rows = [
        (b"k", b"v", []),
        (b"v", b"k", []),
        (b"k", None, []),
        (b"k", b"", []),
        (None, b"v", []),
        (b"k", b"v", [("h", b"1")]),
        (b"k", b"v", [("h", None)]),
        (b"k", b"v", [("h", b"")]),
        (b"kv", b"", []),
    ]
    digests = record_digests(batch(rows))
    assert len(set(digests.tolist())) == len(rows)
    # The same record digests alike wherever it sits (a batch, or a slice of one).
    assert (record_digests(batch(rows).slice(3)) == digests[3:]).all()
    assert record_digests(batch(rows[:1] * 2)).tolist() == [digests[0]] * 2


def test_a_source_is_digested_only_at_the_offsets_compared() -> None:
    rows = [(b"k", b"v", [("h", b"1")]), (b"a", None, []), (None, b"x", [("h", None), ("i", b"2")])] * 3
    plain = batch(rows)
    offsets = np.arange(100, 100 + len(rows), dtype=np.int64)
    whole = pa.RecordBatch.from_arrays(
        [*plain.columns, pa.array(offsets)], names=[*plain.schema.names, "offset"]
    )
    digests = record_digests(whole)
    for wanted in ([], [offsets[4]], [offsets[0], offsets[5], offsets[8]], offsets.tolist()):
        at = np.array(sorted(wanted), np.int64)
        got = _digests(whole, at).to_numpy()
        mask = np.isin(offsets, at)
        assert (got[mask] == digests[mask]).all() and (got[~mask] == 0).all()
    assert (_digests(whole, None).to_numpy() == digests).all()
