"""The RSA key pairs that unwrap Aiven's data keys.

Aiven's plugin wraps each segment's AES-256 data key with RSA-OAEP whose hash and MGF1 hash are
both SHA3-512 (an empty label). The `cryptography` package refuses that pairing, so the unwrap is
done here: the RSA private operation by the Chinese remainder theorem on GMP's integers (gmpy2;
about 1 ms for a 2048-bit key, where Python's own integers take 30), then the OAEP decoding
(RFC 8017, 7.1.2) with `hashlib.sha3_512`. It runs once per segment, never per record.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from segment_io.errors import KafkaTierSettings

_HASH_BYTES = 64  # SHA3-512


def _mgf1(seed: bytes, length: int) -> bytes:
    out = bytearray()
    counter = 0
    while len(out) < length:
        out += hashlib.sha3_512(seed + counter.to_bytes(4, "big")).digest()
        counter += 1
    return bytes(out[:length])


def _xor(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "big") ^ int.from_bytes(b, "big")).to_bytes(len(a), "big")


@dataclass(frozen=True)
class PrivateKey:
    key_id: str
    n: int
    e: int
    p: int
    q: int
    dp: int  # d mod (p - 1)
    dq: int  # d mod (q - 1)
    q_inv: int  # q^-1 mod p

    @classmethod
    def load(cls, key_id: str, path: str) -> PrivateKey:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        try:
            # The key's own consistency checks cost 60 ms a load; every unwrap checks its result by
            # the public exponent instead (_private), which a key whose parts disagree fails.
            key = serialization.load_pem_private_key(
                Path(path).read_bytes(), password=None, unsafe_skip_rsa_key_validation=True
            )
        except (OSError, ValueError, TypeError) as exc:
            raise KafkaTierSettings(f"key pair {key_id}: cannot read its private key {path}: {exc}") from None
        if not isinstance(key, rsa.RSAPrivateKey):
            raise KafkaTierSettings(f"key pair {key_id}: {path} is no RSA private key")
        nums = key.private_numbers()
        return cls(
            key_id,
            nums.public_numbers.n,
            nums.public_numbers.e,
            nums.p,
            nums.q,
            nums.dmp1,
            nums.dmq1,
            nums.iqmp,
        )

    def _private(self, c: int) -> int:
        """c^d mod n, by the Chinese remainder theorem; checked by the public exponent (a wrong
        result, from a fault or a key whose parts disagree, is never decoded as a key)."""
        import gmpy2

        # GMP works without the GIL here: the segments of a partition unwrap their keys in parallel.
        with gmpy2.context(gmpy2.get_context(), allow_release_gil=True):
            m1, m2 = gmpy2.powmod(c, self.dp, self.p), gmpy2.powmod(c, self.dq, self.q)
            m = int(m2 + ((self.q_inv * (m1 - m2)) % self.p) * self.q)
            checked = gmpy2.powmod(m, self.e, self.n)
        if checked != c:
            raise KafkaTierSettings(f"key pair {self.key_id}: its private key's parts do not agree")
        return m

    def unwrap(self, wrapped: bytes) -> bytes | None:
        """The data key that RSA-OAEP (SHA3-512) wrapped, or None where this key did not wrap it."""
        k = (self.n.bit_length() + 7) // 8
        c = int.from_bytes(wrapped, "big")
        if len(wrapped) != k or c >= self.n:
            return None
        em = self._private(c).to_bytes(k, "big")
        masked_seed, masked_db = em[1 : 1 + _HASH_BYTES], em[1 + _HASH_BYTES :]
        seed = _xor(masked_seed, _mgf1(masked_db, _HASH_BYTES))
        db = _xor(masked_db, _mgf1(seed, k - _HASH_BYTES - 1))
        label_hash, rest = db[:_HASH_BYTES], db[_HASH_BYTES:].lstrip(b"\x00")
        if em[0] != 0 or label_hash != hashlib.sha3_512(b"").digest() or not rest or rest[0] != 1:
            return None
        return rest[1:]


@dataclass(frozen=True)
class PublicKey:
    key_id: str
    n: int
    e: int

    @classmethod
    def load(cls, key_id: str, path: str) -> PublicKey:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        try:
            key = serialization.load_pem_public_key(Path(path).read_bytes())
        except (OSError, ValueError, TypeError) as exc:
            raise KafkaTierSettings(f"key pair {key_id}: cannot read its public key {path}: {exc}") from None
        if not isinstance(key, rsa.RSAPublicKey):
            raise KafkaTierSettings(f"key pair {key_id}: {path} is no RSA public key")
        numbers = key.public_numbers()
        return cls(key_id, numbers.n, numbers.e)

    def wrap(self, data_key: bytes, seed: bytes) -> bytes:
        """`data_key` wrapped with RSA-OAEP (SHA3-512, MGF1 SHA3-512, empty label) under the
        random `seed` (64 bytes), as Aiven's plugin wraps it (RFC 8017, 7.1.1)."""
        k = (self.n.bit_length() + 7) // 8
        padding = k - len(data_key) - 2 * _HASH_BYTES - 2
        if padding < 0 or len(seed) != _HASH_BYTES:
            raise ValueError("a data key too long for the key, or a seed of the wrong size")
        db = hashlib.sha3_512(b"").digest() + b"\x00" * padding + b"\x01" + data_key
        masked_db = _xor(db, _mgf1(seed, k - _HASH_BYTES - 1))
        masked_seed = _xor(seed, _mgf1(masked_db, _HASH_BYTES))
        em = int.from_bytes(b"\x00" + masked_seed + masked_db, "big")
        return pow(em, self.e, self.n).to_bytes(k, "big")


@dataclass
class Keyring:
    """The configured key pairs by id, each private key loaded on first use."""

    files: dict[str, str]
    _loaded: dict[str, PrivateKey] = field(default_factory=dict)

    def key(self, key_id: str) -> PrivateKey | None:
        if key_id not in self.files:
            return None
        if key_id not in self._loaded:
            self._loaded[key_id] = PrivateKey.load(key_id, self.files[key_id])
        return self._loaded[key_id]
