"""The order in which Java's `HashMap<Long, V>` iterates its keys: the order a broker writes the
entries of a map it keeps so (its producer snapshots), modelled from the map's documented rules.

- A `Long`'s hash is its two 32-bit halves XORed; the map spreads it (`h ^ (h >>> 16)`) and takes
  its low bits as the bucket in a table of 2^k buckets.
- The table starts at 16 buckets (on the first insertion) and doubles when an insertion takes the
  size past three quarters of it, or when a bucket of a table under 64 buckets reaches nine keys.
- Iteration walks the buckets in order; inside one, keys keep their insertion order (a doubling
  splits each bucket in two without reordering either half).

A bucket of nine or more keys in a table of 64 or more becomes a tree, whose order is not modelled
(its keys stay in insertion order here); ids Kafka hands out come in blocks of consecutive
numbers, which never crowd one bucket so."""

from __future__ import annotations

from collections.abc import Iterable

INITIAL_CAPACITY = 16
LOAD_FACTOR_NUMERATOR, LOAD_FACTOR_DENOMINATOR = 3, 4  # 0.75
TREEIFY_THRESHOLD = 8  # a bucket holding this many takes the next key as a tree (or a doubling)
MIN_TREEIFY_CAPACITY = 64


def long_hash(key: int) -> int:
    """`HashMap.hash(Long.valueOf(key))` as an unsigned 32-bit value."""
    key &= (1 << 64) - 1
    h = (key ^ (key >> 32)) & 0xFFFFFFFF
    return h ^ (h >> 16)


def capacity_after(keys: Iterable[int]) -> int:
    """The table size of a new map after `keys` are put in this order (repeats are updates)."""
    capacity, seen, buckets = INITIAL_CAPACITY, set[int](), dict[int, list[int]]()
    for key in keys:
        if key in seen:
            continue
        seen.add(key)
        h = long_hash(key)
        bucket = buckets.setdefault(h & (capacity - 1), [])
        bucket.append(h)
        grow = len(bucket) > TREEIFY_THRESHOLD and capacity < MIN_TREEIFY_CAPACITY
        if grow:
            capacity = _doubled(capacity, buckets)
        if len(seen) > capacity * LOAD_FACTOR_NUMERATOR // LOAD_FACTOR_DENOMINATOR:
            capacity = _doubled(capacity, buckets)
    return capacity


def _doubled(capacity: int, buckets: dict[int, list[int]]) -> int:
    """Redistribute the buckets' hashes into a table twice the size, keeping their order."""
    wider = capacity * 2
    moved: dict[int, list[int]] = {}
    for index in sorted(buckets):
        for h in buckets[index]:
            moved.setdefault(h & (wider - 1), []).append(h)
    buckets.clear()
    buckets.update(moved)
    return wider


def iteration_order(keys: Iterable[int]) -> list[int]:
    """`keys` (insertion order; a repeat keeps its first place) in the order a new `HashMap<Long, V>`
    they were put into iterates them."""
    unique = list(dict.fromkeys(keys))
    size = capacity_after(unique)
    # Python's sort is stable: inside a bucket, insertion order stays.
    return sorted(unique, key=lambda key: long_hash(key) & (size - 1))
