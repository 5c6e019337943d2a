"""The evidence's key digest: the numba SHA-256 kernel equals hashlib's, and its HMAC equals the
hmac module's, for keys of every length around the block boundaries, any bytes and secrets of
every length (longer than a block too)."""

from __future__ import annotations

import hashlib
import hmac

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.keys.key_digest import KeyDigest, hex_lines, sha256_rows

pytestmark = pytest.mark.unit


def packed(keys: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lengths = np.array([len(k) for k in keys], dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    return np.frombuffer(b"".join(keys) or b"\0", dtype=np.uint8), starts, lengths


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=20))
def test_the_kernel_is_sha256(keys: list[bytes]) -> None:
    assert hex_lines(sha256_rows(*packed(keys))).decode().splitlines() == [
        hashlib.sha256(k).hexdigest() for k in keys
    ]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=20), st.binary(min_size=16, max_size=200))
def test_the_keyed_digest_is_hmac_sha256(keys: list[bytes], secret: bytes) -> None:
    digest = KeyDigest(secret)
    assert digest.hex(*packed(keys)) == [hmac.new(secret, k, hashlib.sha256).hexdigest() for k in keys]


def test_a_secret_is_long_enough_never_printed_and_named_by_a_fingerprint() -> None:
    with pytest.raises(ValueError, match="at least 16 bytes"):
        KeyDigest(b"short")
    secret = b"a secret the operator keeps"
    assert secret.decode() not in repr(KeyDigest(secret))
    assert (
        KeyDigest(secret).fingerprint == KeyDigest(secret).fingerprint != KeyDigest(secret + b"!").fingerprint
    )
    once, twice = KeyDigest.ephemeral(), KeyDigest.ephemeral()
    assert not once.given and once.hex(*packed([b"k"])) != twice.hex(*packed([b"k"]))


def test_every_length_across_two_blocks_and_the_hex_lines() -> None:
    keys = [bytes(range(n)) for n in range(140)]
    digests = sha256_rows(*packed(keys))
    assert [bytes(d) for d in digests] == [hashlib.sha256(k).digest() for k in keys]
    assert hex_lines(digests).decode() == "".join(hashlib.sha256(k).hexdigest() + "\n" for k in keys)
