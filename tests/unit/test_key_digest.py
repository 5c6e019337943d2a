"""The evidence's key digest: the numba SHA-256 kernel equals hashlib's, for keys of every length
around the block boundaries and any bytes."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.jobs.erase.key_digest import hex_digests, hex_lines, sha256_rows

pytestmark = pytest.mark.unit


def packed(keys: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lengths = np.array([len(k) for k in keys], dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    return np.frombuffer(b"".join(keys) or b"\0", dtype=np.uint8), starts, lengths


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=20))
def test_the_kernel_is_sha256(keys: list[bytes]) -> None:
    assert hex_digests(*packed(keys)) == [hashlib.sha256(k).hexdigest() for k in keys]


def test_every_length_across_two_blocks_and_the_hex_lines() -> None:
    keys = [bytes(range(n)) for n in range(140)]
    digests = sha256_rows(*packed(keys))
    assert [bytes(d) for d in digests] == [hashlib.sha256(k).digest() for k in keys]
    assert hex_lines(digests).decode() == "".join(hashlib.sha256(k).hexdigest() + "\n" for k in keys)
