"""Producer snapshots list their entries in the iteration order of the broker's HashMap: segpipe's
model of that order (segment_io.java_hash_map) against Java's own HashMap, over many sets of
producer ids: Kafka-like blocks of consecutive ids, ids anywhere in the 63-bit range, ids that
share buckets (including enough to make a small table grow early), inserted in shuffled orders,
from one id to a few hundred."""

from __future__ import annotations

import os
import random
import struct
import subprocess
from pathlib import Path

import pytest

from segment_io.java_hash_map import iteration_order

pytestmark = pytest.mark.kafka
SOURCE = Path(__file__).with_name("java") / "HashMapOrder.java"


def id_set(rng: random.Random) -> list[int]:
    n, kind = rng.choice((1, 2, 5, 12, 13, 24, 25, 40, 48, 49, 100, 300)), rng.randrange(4)
    if kind == 0:  # blocks of consecutive ids, as the controller hands them out
        ids = [base + i for base in rng.sample(range(0, 1 << 40, 1000), 3) for i in range(n)]
    elif kind == 1:
        ids = [rng.randrange(1 << 63) for _ in range(n)]
    elif kind == 2:  # one bucket in a small table: nine such ids make a 16-bucket table double
        step = rng.choice((16, 32, 1 << 16, 1 << 32))
        ids = [rng.randrange(4) + step * i for i in range(min(n, 12))]
    else:
        ids = [rng.randrange(1 << 12) for _ in range(n)]
    rng.shuffle(ids)
    return ids + rng.sample(ids, len(ids) // 4)  # repeats: updates, which keep an id's place


def test_the_modelled_order_is_javas(kafka_jars: Path, tmp_path: Path) -> None:
    rng = random.Random(1279)
    cases = [id_set(rng) for _ in range(1000)]
    given, made = tmp_path / "in", tmp_path / "out"
    given.write_bytes(
        struct.pack(">i", len(cases)) + b"".join(struct.pack(f">i{len(c)}q", len(c), *c) for c in cases)
    )
    subprocess.run(
        ["java", str(SOURCE), str(given), str(made)],
        check=True,
        capture_output=True,
        timeout=300,
        env={**os.environ},
    )
    data, pos, theirs = made.read_bytes(), 4, []
    for _ in cases:
        (n,) = struct.unpack_from(">i", data, pos)
        theirs.append(list(struct.unpack_from(f">{n}q", data, pos + 4)))
        pos += 4 + 8 * n
    different = [i for i, c in enumerate(cases) if iteration_order(c) != theirs[i]]
    assert different == [], f"{len(different)} of {len(cases)} differ, e.g. {different[:5]}"
