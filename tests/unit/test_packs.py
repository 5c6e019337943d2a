"""How segments are grouped into Spark tasks: in order, balanced by bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipelines.runtime.tasks import packs as _packs

pytestmark = pytest.mark.unit


def test_equal_segments_split_evenly() -> None:
    assert [len(p) for p in _packs([128] * 32, 4)] == [8, 8, 8, 8]
    assert sorted(len(p) for p in _packs([128] * 32, 6)) == [5, 5, 5, 5, 6, 6]


def test_the_size_limit_adds_packs() -> None:
    assert _packs([10] * 6, 1, most=20) == [[0, 1], [2, 3], [4, 5]]


@given(st.lists(st.integers(0, 10**9), max_size=60), st.integers(1, 16))
def test_packs_keep_every_segment_once_in_order(sizes: list[int], parts: int) -> None:
    packs = _packs(sizes, parts)
    assert [i for p in packs for i in p] == list(range(len(sizes)))
    assert all(packs) and len(packs) <= max(parts, -(-sum(sizes) // (1 << 30)))
