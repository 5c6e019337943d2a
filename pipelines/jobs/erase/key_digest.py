"""The digest an erase's evidence names a key by: SHA-256 of its bytes (FIPS 180-4), computed by
one numba kernel over many keys at once and written out as lines of lowercase hex, so that millions
of listed keys are digested without a Python object per key."""

from __future__ import annotations

import binascii

import numpy as np
from numba import njit

DIGEST = "sha256"
DIGEST_BYTES = 32

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
def sha256_rows(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The SHA-256 of each `data[starts[i]:+lengths[i]]`, as an (n, 32) uint8 array. Words are
    held in 64-bit integers and masked to 32 bits after every sum."""
    n = starts.shape[0]
    out = np.empty((n, DIGEST_BYTES), dtype=np.uint8)
    w = np.empty(64, dtype=np.uint64)
    h = np.empty(8, dtype=np.uint64)
    mask = np.uint64(MASK)
    padded = np.zeros(128, dtype=np.uint8)
    for i in range(n):
        start, length = starts[i], lengths[i]
        h[:] = _H0
        blocks = (length + 9 + 63) // 64  # the message, a 0x80 byte, zeros, its bit length
        if padded.shape[0] < blocks * 64:
            padded = np.zeros(blocks * 64, dtype=np.uint8)
        size = blocks * 64
        padded[:length] = data[start : start + length]
        padded[length] = 0x80
        padded[length + 1 : size - 8] = 0
        bits = length * 8
        for b in range(8):
            padded[size - 1 - b] = (bits >> (8 * b)) & 0xFF
        for block in range(blocks):
            base = block * 64
            for t in range(16):
                at = base + t * 4
                w[t] = (
                    (np.uint64(padded[at]) << np.uint64(24))
                    | (np.uint64(padded[at + 1]) << np.uint64(16))
                    | (np.uint64(padded[at + 2]) << np.uint64(8))
                    | np.uint64(padded[at + 3])
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
        for k in range(8):
            for b in range(4):
                out[i, k * 4 + b] = np.uint8((h[k] >> np.uint64(24 - 8 * b)) & np.uint64(0xFF))
    return out


def hex_lines(digests: np.ndarray) -> bytes:
    """Digests (an (n, 32) uint8 array) as lines of lowercase hex, each ending in a newline."""
    lines = np.empty((len(digests), 2 * DIGEST_BYTES + 1), dtype=np.uint8)
    hexed = binascii.hexlify(np.ascontiguousarray(digests).tobytes())
    lines[:, :-1] = np.frombuffer(hexed, dtype=np.uint8).reshape(len(digests), 2 * DIGEST_BYTES)
    lines[:, -1] = ord("\n")
    return lines.tobytes()


def hex_digests(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> list[str]:
    """The SHA-256 (hex) of each key, as strings (what a report lists)."""
    return hex_lines(sha256_rows(data, starts, lengths)).decode("ascii").splitlines()
