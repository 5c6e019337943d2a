"""The digest an erase's evidence names a key by: HMAC-SHA-256 of its bytes under a secret the
operator keeps (RFC 2104 over FIPS 180-4), computed by one numba kernel over many keys at once and
written out as lines of lowercase hex, so that millions of listed keys are digested without a
Python object per key. Keyed, so that the evidence confirms a candidate key only to whoever holds
the secret: an unkeyed digest of a key (a user id, an e-mail address) is matched by anyone who
digests the candidates."""

from __future__ import annotations

import binascii
import hashlib
import hmac
import os
from dataclasses import dataclass, field

import numpy as np

from segment_io.kernel import njit

DIGEST = "hmac-sha256"
DIGEST_BYTES = 32
BLOCK_BYTES = 64
# A secret shorter than this is refused (RFC 2104 asks for at least the digest's length; 16 bytes
# is the floor below which guessing it is the easier attack).
SECRET_MIN_BYTES = 16
EPHEMERAL_NOTE = (
    "segpipe: note: no --secret-file: the evidence names keys by digests under a secret made for this "
    "run and kept nowhere, so nobody (you included) can match a key against them later"
)


def read_secret(url: str) -> KeyDigest:
    """The operator's erasure secret from a file (its bytes, one final newline left out), refused
    when missing or shorter than SECRET_MIN_BYTES."""
    from pipelines.errors import ConfigError
    from segment_io.storage import open_storage

    storage, path = open_storage(url)
    if not storage.is_file(path):
        raise ConfigError(f"--secret-file {url}: no such file")
    secret = storage.read(path)
    secret = secret[:-2] if secret.endswith(b"\r\n") else secret.removesuffix(b"\n")
    if len(secret) < SECRET_MIN_BYTES:
        raise ConfigError(
            f"--secret-file {url}: {len(secret)} bytes; an erasure secret needs at least {SECRET_MIN_BYTES} "
            "(e.g. head -c 32 /dev/urandom | base64 > FILE)"
        )
    return KeyDigest(secret)


# The first 32 bits of the fractional parts of the cube roots of the first 64 primes, and of the
# square roots of the first 8 (FIPS 180-4, 4.2.2 and 5.3.3).
_K = np.array(
    [
        0x428A2F98, 0x71374491, 0xB5C0FBCF, 0xE9B5DBA5, 0x3956C25B, 0x59F111F1, 0x923F82A4, 0xAB1C5ED5,
        0xD807AA98, 0x12835B01, 0x243185BE, 0x550C7DC3, 0x72BE5D74, 0x80DEB1FE, 0x9BDC06A7, 0xC19BF174,
        0xE49B69C1, 0xEFBE4786, 0x0FC19DC6, 0x240CA1CC, 0x2DE92C6F, 0x4A7484AA, 0x5CB0A9DC, 0x76F988DA,
        0x983E5152, 0xA831C66D, 0xB00327C8, 0xBF597FC7, 0xC6E00BF3, 0xD5A79147, 0x06CA6351, 0x14292967,
        0x27B70A85, 0x2E1B2138, 0x4D2C6DFC, 0x53380D13, 0x650A7354, 0x766A0ABB, 0x81C2C92E, 0x92722C85,
        0xA2BFE8A1, 0xA81A664B, 0xC24B8B70, 0xC76C51A3, 0xD192E819, 0xD6990624, 0xF40E3585, 0x106AA070,
        0x19A4C116, 0x1E376C08, 0x2748774C, 0x34B0BCB5, 0x391C0CB3, 0x4ED8AA4A, 0x5B9CCA4F, 0x682E6FF3,
        0x748F82EE, 0x78A5636F, 0x84C87814, 0x8CC70208, 0x90BEFFFA, 0xA4506CEB, 0xBEF9A3F7, 0xC67178F2,
    ],
    dtype=np.uint64,
)  # fmt: skip
_H0 = np.array(
    [0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19],
    dtype=np.uint64,
)
MASK = 0xFFFFFFFF


@njit(cache=True, nogil=True, inline="always")
def _rotr(x: np.uint64, n: int) -> np.uint64:
    return ((x >> np.uint64(n)) | (x << np.uint64(32 - n))) & np.uint64(MASK)


@njit(cache=True, nogil=True)
def _compress(h: np.ndarray, block: np.ndarray, base: int, w: np.ndarray) -> None:
    """One SHA-256 compression of `block[base:base + 64]` into the state `h`. Words are held in
    64-bit integers and masked to 32 bits after every sum."""
    mask = np.uint64(MASK)
    for t in range(16):
        at = base + t * 4
        w[t] = (
            (np.uint64(block[at]) << np.uint64(24))
            | (np.uint64(block[at + 1]) << np.uint64(16))
            | (np.uint64(block[at + 2]) << np.uint64(8))
            | np.uint64(block[at + 3])
        )
    for t in range(16, 64):
        s0 = _rotr(w[t - 15], 7) ^ _rotr(w[t - 15], 18) ^ (w[t - 15] >> np.uint64(3))
        s1 = _rotr(w[t - 2], 17) ^ _rotr(w[t - 2], 19) ^ (w[t - 2] >> np.uint64(10))
        w[t] = (w[t - 16] + s0 + w[t - 7] + s1) & mask
    a, b_, c, d, e, f, g, hh = h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
    for t in range(64):
        big1 = _rotr(e, 6) ^ _rotr(e, 11) ^ _rotr(e, 25)
        choose = (e & f) ^ ((~e & mask) & g)
        temp1 = (hh + big1 + choose + _K[t] + w[t]) & mask
        big0 = _rotr(a, 2) ^ _rotr(a, 13) ^ _rotr(a, 22)
        majority = (a & b_) ^ (a & c) ^ (b_ & c)
        temp2 = (big0 + majority) & mask
        hh, g, f, e = g, f, e, (d + temp1) & mask
        d, c, b_, a = c, b_, a, (temp1 + temp2) & mask
    h[0] = (h[0] + a) & mask
    h[1] = (h[1] + b_) & mask
    h[2] = (h[2] + c) & mask
    h[3] = (h[3] + d) & mask
    h[4] = (h[4] + e) & mask
    h[5] = (h[5] + f) & mask
    h[6] = (h[6] + g) & mask
    h[7] = (h[7] + hh) & mask


@njit(cache=True, nogil=True)
def sha256_rows_from(
    data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, h0: np.ndarray, before: int
) -> np.ndarray:
    """The SHA-256 of `prefix + data[starts[i]:+lengths[i]]` for each i, as an (n, 32) uint8 array,
    where `h0` is the state after the `before` bytes of a prefix (whole blocks) were hashed."""
    n = starts.shape[0]
    out = np.empty((n, DIGEST_BYTES), dtype=np.uint8)
    w = np.empty(64, dtype=np.uint64)
    h = np.empty(8, dtype=np.uint64)
    padded = np.zeros(128, dtype=np.uint8)
    for i in range(n):
        start, length = starts[i], lengths[i]
        h[:] = h0
        blocks = (length + 9 + 63) // 64  # the message, a 0x80 byte, zeros, its bit length
        if padded.shape[0] < blocks * 64:
            padded = np.zeros(blocks * 64, dtype=np.uint8)
        size = blocks * 64
        padded[:length] = data[start : start + length]
        padded[length] = 0x80
        padded[length + 1 : size - 8] = 0
        bits = (before + length) * 8
        for b in range(8):
            padded[size - 1 - b] = (bits >> (8 * b)) & 0xFF
        for block in range(blocks):
            _compress(h, padded, block * 64, w)
        for k in range(8):
            for b in range(4):
                out[i, k * 4 + b] = np.uint8((h[k] >> np.uint64(24 - 8 * b)) & np.uint64(0xFF))
    return out


def sha256_rows(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The SHA-256 of each `data[starts[i]:+lengths[i]]`, as an (n, 32) uint8 array."""
    return sha256_rows_from(data, starts, lengths, _H0, 0)


def _state_after(block: bytes) -> np.ndarray:
    """The SHA-256 state after one 64-byte block (HMAC's inner and outer pads)."""
    h = _H0.copy()
    _compress(h, np.frombuffer(block, dtype=np.uint8), 0, np.empty(64, dtype=np.uint64))
    return h


@dataclass(frozen=True)
class KeyDigest:
    """HMAC-SHA-256 under `secret`, over many keys at once. `given`: whether the operator gave the
    secret (else one was made for the run and kept nowhere). The secret never prints."""

    secret: bytes = field(repr=False)
    given: bool = True

    def __post_init__(self) -> None:
        if len(self.secret) < SECRET_MIN_BYTES:
            raise ValueError(f"an erasure secret needs at least {SECRET_MIN_BYTES} bytes")

    @classmethod
    def ephemeral(cls) -> KeyDigest:
        """A secret for one run, kept nowhere: its digests confirm no key to anyone."""
        return cls(os.urandom(32), given=False)

    @property
    def fingerprint(self) -> str:
        """Names the secret without revealing it: the HMAC of a fixed text under it (16 hex)."""
        return hmac.new(self.secret, b"segpipe erasure secret", hashlib.sha256).hexdigest()[:16]

    def rows(self, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """The HMAC of each key `data[starts[i]:+lengths[i]]`, as an (n, 32) uint8 array."""
        key = hashlib.sha256(self.secret).digest() if len(self.secret) > BLOCK_BYTES else self.secret
        key = key.ljust(BLOCK_BYTES, b"\0")
        inner = sha256_rows_from(
            data, starts, lengths, _state_after(bytes(b ^ 0x36 for b in key)), BLOCK_BYTES
        )
        n = len(starts)
        at = np.arange(n, dtype=np.int64) * DIGEST_BYTES
        sizes = np.full(n, DIGEST_BYTES, dtype=np.int64)
        flat = inner.reshape(-1) if n else np.zeros(0, np.uint8)
        return sha256_rows_from(flat, at, sizes, _state_after(bytes(b ^ 0x5C for b in key)), BLOCK_BYTES)

    def hex(self, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> list[str]:
        """The HMAC (hex) of each key, as strings (what a report lists)."""
        return hex_lines(self.rows(data, starts, lengths)).decode("ascii").splitlines()


def hex_lines(digests: np.ndarray) -> bytes:
    """Digests (an (n, 32) uint8 array) as lines of lowercase hex, each ending in a newline."""
    lines = np.empty((len(digests), 2 * DIGEST_BYTES + 1), dtype=np.uint8)
    hexed = binascii.hexlify(np.ascontiguousarray(digests).tobytes())
    lines[:, :-1] = np.frombuffer(hexed, dtype=np.uint8).reshape(len(digests), 2 * DIGEST_BYTES)
    lines[:, -1] = ord("\n")
    return lines.tobytes()
