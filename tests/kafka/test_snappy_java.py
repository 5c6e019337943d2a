"""segpipe's snappy blocks against snappy-java's, the library in Kafka's own jars: the same bytes
for inputs of every size and shape (incompressible, few symbols, repeated words, record-like
binary, short periods; empty to several 64 KiB fragments)."""

from __future__ import annotations

import os
import random
import struct
import subprocess
from pathlib import Path

import pytest

from segment_io.format.snappy_encode import snappy_compress

pytestmark = pytest.mark.kafka
SOURCE = Path(__file__).with_name("java") / "SnappyBlocks.java"
SIZES = (0, 1, 5, 15, 16, 17, 31, 33, 100, 1000, 5000, 20000, 32768, 40000, 65536, 70000, 140000)


def sample(rng: random.Random) -> bytes:
    n, kind = rng.choice(SIZES), rng.randrange(5)
    if kind == 0:
        return rng.randbytes(n)
    if kind == 1:
        return bytes(rng.choice(b"abcde ") for _ in range(n))
    if kind == 2:
        words = [rng.randbytes(rng.randrange(1, 12)) for _ in range(30)]
        out = bytearray()
        while len(out) < n:
            out += rng.choice(words)
        return bytes(out[:n])
    if kind == 3:
        out = bytearray()
        while len(out) < n:
            out += struct.pack(">qi", rng.randrange(1 << 40), rng.randrange(1 << 20))
            out += b"k%08d" % rng.randrange(1000) + b"value " * rng.randrange(10)
        return bytes(out[:n])
    return (rng.randbytes(rng.randrange(1, 64)) * (n // 8 + 1))[:n]


def test_snappy_blocks_are_snappy_javas(kafka_jars: Path, tmp_path: Path) -> None:
    rng = random.Random(405)
    cases = [sample(rng) for _ in range(600)]
    given, made = tmp_path / "in", tmp_path / "out"
    given.write_bytes(struct.pack(">i", len(cases)) + b"".join(struct.pack(">i", len(c)) + c for c in cases))
    subprocess.run(
        ["java", "-cp", f"{kafka_jars}/*", str(SOURCE), str(given), str(made)],
        check=True,
        capture_output=True,
        timeout=300,
        env={**os.environ},
    )
    data, pos, theirs = made.read_bytes(), 4, []
    for _ in cases:
        (size,) = struct.unpack_from(">i", data, pos)
        theirs.append(data[pos + 4 : pos + 4 + size])
        pos += 4 + size
    different = [i for i, c in enumerate(cases) if snappy_compress(c) != theirs[i]]
    assert different == [], f"{len(different)} of {len(cases)} differ, e.g. input {different[:5]}"
