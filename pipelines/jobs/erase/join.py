"""The key join: which records of a set of segments carry a listed key, for a key list too large
to travel whole with every task (the tuning setting key.broadcast.bytes).

Two map sides run over the run's flow (Spark, or a local master's processes): one reads the list
in parts (key_list.KeyListPart), the other frames the segments' data records and takes each one's
key, and, for `--also-in-headers`, the values of its named headers. Both split their rows by key
hash into the same buckets (KeyRows.bucketed), so a key and every record carrying it meet in one
reduce task, which holds only its bucket: that bucket's keys in an exact-key table (equality on
the bytes, never on a hash alone) and its records' key rows. It sends each match on to the task
of its segment (SegmentRef.route), and what it learnt of its keys (how many, the digests of those
found and of those found nowhere) to one more route. Only keys, offsets and digests cross the
shuffle; values never do, and no Python object is made per record.

A record row carries its segment (its index in the join's refs), whether the key was its own or
the n-th header's, and its offset relative to the segment's base, packed in its offset column:
ref · 2^40 + priority · 2^32 + relative offset (a segment's relative offsets fit 32 bits)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from pipelines.keys.key_digest import KeyDigest, hex_lines
from pipelines.keys.key_list import KeyList, KeyListPart, refused_empty
from pipelines.keys.key_set import ErasedKeys, key_rows, named_header_values
from pipelines.log.keytable import EMPTY, KeyRows, hash_keys
from pipelines.runtime.dataflow import Flow, flow_of
from pipelines.runtime.spark_handle import Spark
from pipelines.runtime.tasks import packs
from segment_io.layout import SegmentFiles
from segment_io.segment.framing import Framed, chunk_batches
from segment_io.segment.reader import SegmentReader
from segment_io.segment.sections import Arena
from segment_io.storage import Location, Place

# A reduce task's share: about this many bytes of listed keys per bucket (the table holding them
# takes about three times that).
JOIN_KEY_BYTES = 64 * 2**20
# Records' key rows a reduce task holds until its bucket's keys are all in: about a 16th of the
# segments' bytes per bucket at most (keys are a fraction of a record).
JOIN_RECORD_BYTES = 1 << 30

REF_SHIFT, PRIORITY_SHIFT = 40, 32
PRIORITY_MAX = 255  # a header past the 254th is counted as the 254th (it is still matched)
MOST_REFS = 1 << (63 - REF_SHIFT)
_KEYS, _RECORDS = 0, 1
U = TypeVar("U")
R = TypeVar("R")


@dataclass(frozen=True)
class SegmentRef:
    """A segment the join reads; its matches go to the next stage's task `route`."""

    route: int
    log: Location  # the log the segment is in
    files: SegmentFiles


@dataclass(frozen=True)
class SegmentMatches:
    """One bucket's matches in one segment: per matching record its offset, whether the key was
    its own (priority 0) or its n-th named header's value (n + 1), and the key's id (bucket ·
    2^32 + entry in the bucket)."""

    ref: int
    offsets: np.ndarray  # int64
    priority: np.ndarray  # int64
    keys: np.ndarray  # int64


@dataclass(frozen=True)
class BucketKeys:
    """What one bucket learnt of its listed keys: how many there are, the digest of each found
    (by key id), and how many were found nowhere, their digests in a file of their own where the
    run keeps them (one per line, sorted: the driver never holds them all)."""

    listed: int
    found: dict[int, str]
    not_found: int
    not_found_file: str | None


@dataclass(frozen=True)
class ListedRecords:
    """The records of one segment that carry a listed key, each once (its own key first, then
    its first named header that does), as the erase and its proof match them."""

    offsets: np.ndarray  # int64, ascending
    keys: np.ndarray  # int64, the key id of each

    @classmethod
    def merged(cls, matches: Iterable[SegmentMatches], base_offset: int) -> ListedRecords:
        mine = list(matches)
        if not mine:
            return cls(np.zeros(0, np.int64), np.zeros(0, np.int64))
        offsets = np.concatenate([m.offsets for m in mine]) + base_offset
        priority = np.concatenate([m.priority for m in mine])
        keys = np.concatenate([m.keys for m in mine])
        order = np.lexsort((priority, offsets))
        offsets, keys = offsets[order], keys[order]
        first = np.concatenate([[True], offsets[1:] != offsets[:-1]])
        return cls(offsets[first], keys[first])

    def entries_of(self, offsets: np.ndarray) -> np.ndarray:
        """The key id of each record at `offsets`, EMPTY for a record carrying no listed key."""
        out = np.full(len(offsets), EMPTY, dtype=np.int64)
        if len(self.offsets) == 0 or len(offsets) == 0:
            return out
        at = np.minimum(np.searchsorted(self.offsets, offsets), len(self.offsets) - 1)
        hit = self.offsets[at] == offsets
        out[hit] = self.keys[at[hit]]
        return out


def buckets_for(key_list: KeyList, segment_bytes: int, parallelism: int) -> int:
    """Enough buckets that a reduce task holds its share of the keys and of the records' rows."""
    by_keys = -(-key_list.size // JOIN_KEY_BYTES)
    by_records = -(-segment_bytes // JOIN_RECORD_BYTES)
    return max(1, parallelism, by_keys, by_records)


def listed_records(
    flow: Flow,
    parallelism: int,
    key_list: KeyList,
    refs: list[SegmentRef],
    header_names: ErasedKeys | None,
    evidence_route: int,
    not_found_dir: Location | None = None,
    digest: KeyDigest | None = None,
) -> object:
    """The join over `flow`: a frame of (route, SegmentMatches) and (evidence_route, BucketKeys),
    to be routed to the next stage's tasks; the digests of keys found nowhere are written under
    `not_found_dir`, or only counted (None)."""
    if len(refs) >= MOST_REFS:
        raise ValueError(f"a key join reads at most {MOST_REFS - 1} segments at once")
    buckets = buckets_for(key_list, sum(r.files.size for r in refs), parallelism)
    list_parts = [[p] for p in key_list.parts(parallelism * 2)]
    indexed = list(enumerate(refs))
    chosen = packs([r.files.size for r in refs], parallelism * 2)
    ref_packs = [[indexed[i] for i in pack] for pack in chosen]
    key_side = flow.each(list_parts, lambda pack: _list_rows(pack, buckets))
    record_side = flow.each(ref_packs, lambda pack: _record_rows(pack, header_names, buckets))
    routes = np.array([r.route for r in refs], dtype=np.int64)
    named = digest or KeyDigest.ephemeral()  # one secret for every bucket of the run
    return flow.routed(
        flow.union([key_side, record_side]),
        buckets,
        lambda bucket, items: _match_bucket(bucket, items, routes, evidence_route, not_found_dir, named),
    )


def _list_rows(parts: list[KeyListPart], buckets: int) -> Iterator[tuple[int, tuple[int, KeyRows]]]:
    """Executed on a worker: the keys of list parts, by bucket."""
    for part in parts:
        for array in part.read():
            rows = key_rows(array)
            for b, piece in rows.bucketed(buckets):
                yield b, (_KEYS, piece)


def _record_rows(
    refs: list[tuple[int, SegmentRef]], header_names: ErasedKeys | None, buckets: int
) -> Iterator[tuple[int, tuple[int, KeyRows]]]:
    """Executed on a worker: the keys (and named header values) of the segments' data records,
    by bucket; control batches carry no data record."""
    arena = Arena()
    for index, ref in refs:
        reader = SegmentReader(ref.log.storage, ref.files.log.path, ref.files.base_offset)
        table = reader.scan().table
        tag = np.int64(index) << np.int64(REF_SHIFT)
        for chunk in chunk_batches(table):
            framed = reader.frame(chunk[~table.is_control[chunk]], arena)
            relative = framed.offset - ref.files.base_offset
            data = framed.sections.data
            keyed = np.flatnonzero(framed.key_len >= 0)
            rows = [_rows(data, framed.key_start[keyed], framed.key_len[keyed], tag + relative[keyed])]
            if header_names is not None and len(header_names):
                rows.append(_header_rows(framed, header_names, tag, relative))
            for b, piece in KeyRows.concat(rows).bucketed(buckets):
                yield b, (_RECORDS, piece)


def _header_rows(framed: Framed, header_names: ErasedKeys, tag: np.int64, relative: np.ndarray) -> KeyRows:
    """Rows of the values of the records' named headers, each tagged with its header's place."""
    values = named_header_values(framed, np.flatnonzero(framed.header_count > 0), header_names)
    priority = np.minimum(values.place + 1, PRIORITY_MAX).astype(np.int64) << np.int64(PRIORITY_SHIFT)
    return _rows(framed.sections.data, values.start, values.length, tag + priority + relative[values.owner])


def _rows(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, tags: np.ndarray) -> KeyRows:
    """Key rows hashed as the list's keys are (one partition, 0), so equal bytes meet."""
    tps = np.zeros(len(starts), dtype=np.int32)
    return KeyRows(tps, hash_keys(tps, data, starts, lengths), data, starts, lengths, tags)


def _match_bucket(
    bucket: int,
    items: Iterator[tuple[int, KeyRows]],
    routes: np.ndarray,
    evidence_route: int,
    not_found_dir: Location | None,
    digest: KeyDigest,
) -> Iterator[tuple[int, object]]:
    """Executed on a worker, per bucket: its keys in a table, its record rows looked up in it;
    the matches to their segments' routes, what the bucket learnt of its keys to the evidence's."""
    keys: list[KeyRows] = []
    records: list[KeyRows] = []
    for kind, rows in items:
        (keys if kind == _KEYS else records).append(rows)
    table = ErasedKeys.from_rows(KeyRows.concat(keys))
    tags, entries = [], []
    if len(table):
        for rows in records:
            found = table.table.entries(rows)
            hit = np.flatnonzero(found != EMPTY)
            tags.append(rows.offset[hit])
            entries.append(found[hit])
    tag = np.concatenate(tags) if tags else np.zeros(0, np.int64)
    entry = np.concatenate(entries) if entries else np.zeros(0, np.int64)
    ids = (np.int64(bucket) << np.int64(32)) + entry
    ref = tag >> np.int64(REF_SHIFT)
    priority = (tag >> np.int64(PRIORITY_SHIFT)) & np.int64(PRIORITY_MAX)
    relative = tag & np.int64(0xFFFFFFFF)
    order = np.argsort(ref, kind="stable")
    ref, priority, relative, ids = ref[order], priority[order], relative[order], ids[order]
    edges = np.flatnonzero(np.diff(ref)) + 1
    for part in np.split(np.arange(len(ref)), edges):
        if len(part):
            r = int(ref[part[0]])
            yield int(routes[r]), SegmentMatches(r, relative[part], priority[part], ids[part])
    found_entries = np.unique(entry)
    missing = np.ones(len(table), dtype=np.bool_)
    missing[found_entries] = False
    name = None
    if missing.any() and not_found_dir is not None:
        name = not_found_name(bucket)
        _write_digests(table, np.flatnonzero(missing), not_found_dir, name, digest)
    found_digests = dict(
        zip(((bucket << 32) + found_entries).tolist(), table.digests(digest, found_entries), strict=True)
    )
    yield evidence_route, BucketKeys(len(table), found_digests, int(missing.sum()), name)


# Digests of keys found nowhere are written this many lines at a time.
DIGEST_LINES = 1 << 20


def _write_digests(
    table: ErasedKeys, entries: np.ndarray, directory: Location, name: str, digest: KeyDigest
) -> None:
    """The digests of the keys `entries` as lines of hex, sorted, into one new file: a digest
    kernel over the keys, no Python object per key."""
    rows = table.table.rows()
    digests = digest.rows(rows.data, rows.starts[entries], rows.lengths[entries])
    digests = digests[_byte_order(digests)]
    pending = directory.storage.open_write(directory.file(name))
    try:
        for lo in range(0, len(digests), DIGEST_LINES):
            pending.write(hex_lines(digests[lo : lo + DIGEST_LINES]))
        pending.commit()
    except BaseException:
        pending.discard()
        raise


def _byte_order(digests: np.ndarray) -> np.ndarray:
    """The order that sorts digests by their bytes: by their first 8 bytes (a big-endian word), or
    by all 32 where two share those."""
    words = digests.view(">u8")
    order = np.argsort(words[:, 0], kind="stable")
    first = words[order, 0]
    if len(first) > 1 and (first[1:] == first[:-1]).any():
        order = np.lexsort((words[:, 3], words[:, 2], words[:, 1], words[:, 0]))
    return order


def not_found_name(bucket: int) -> str:
    """The file of a bucket's digests of keys found nowhere."""
    return f"bucket-{bucket:05d}.hmac-sha256"


@dataclass(frozen=True)
class JoinedKeys:
    """What the buckets learnt of the listed keys: how many distinct ones, the digest of each
    found (by key id), how many were found nowhere and the files their digests are in."""

    listed: int
    found: dict[int, str]
    not_found: int
    not_found_files: list[str]


def run_joined(
    spark: Spark,
    key_list: KeyList,
    header_names: ErasedKeys | None,
    units: Sequence[U],
    segments_of: Callable[[U], list[tuple[Place, SegmentFiles]]],
    sizes: list[int],
    tasks_per_core: int,
    work: Callable[[U, list[ListedRecords]], R],
    not_found_dir: Place | None = None,
    digest: KeyDigest | None = None,
) -> tuple[list[R], JoinedKeys]:
    """`work(unit, listed records of each of its segments)` for every unit (an erase's segment, a
    proof's pair of segments), on the run's flow after the key join; results in no set order.
    The digests of keys found nowhere go to files under `not_found_dir` (None: counted only). An
    empty list is refused."""
    with flow_of(spark) as (flow, parallelism):
        chosen = packs(sizes, parallelism * tasks_per_core)
        refs: list[SegmentRef] = []
        ref_ids: dict[int, list[int]] = {}
        for route, pack in enumerate(chosen):
            for u in pack:
                segments = segments_of(units[u])
                ref_ids[u] = list(range(len(refs), len(refs) + len(segments)))
                refs += [SegmentRef(route, Location.of(log), files) for log, files in segments]
        by_route = [[(units[u], ref_ids[u]) for u in pack] for pack in chosen]
        bases = [ref.files.base_offset for ref in refs]
        evidence = len(chosen)  # the route of what the buckets learnt of their keys
        not_found = Location.of_optional(not_found_dir)
        matched = listed_records(flow, parallelism, key_list, refs, header_names, evidence, not_found, digest)
        done = flow.collected(
            flow.routed(
                matched,
                evidence + 1,
                lambda r, items: _joined_work(r, items, by_route, bases, work, evidence),
            )
        )
    buckets = [item for _, item in done if isinstance(item, BucketKeys)]
    joined = JoinedKeys(
        sum(b.listed for b in buckets),
        {key: digest for b in buckets for key, digest in b.found.items()},
        sum(b.not_found for b in buckets),
        sorted(b.not_found_file for b in buckets if b.not_found_file is not None),
    )
    if joined.listed == 0:
        raise refused_empty(key_list.url)
    return [item for route, item in done if route != evidence], joined


def _joined_work(
    route: int,
    items: Iterator[Any],
    by_route: list[list[tuple[U, list[int]]]],
    bases: list[int],
    work: Callable[[U, list[ListedRecords]], R],
    evidence: int,
) -> Iterator[tuple[int, Any]]:
    """Executed on a worker: one route's units, each with the matches the join sent its segments
    (what the buckets learnt of their keys passes through to the driver)."""
    if route == evidence:
        yield from ((route, item) for item in items)
        return
    mine: dict[int, list[SegmentMatches]] = {}
    for match in items:
        mine.setdefault(match.ref, []).append(match)
    for unit, ids in by_route[route]:
        yield route, work(unit, [ListedRecords.merged(mine.get(i, []), bases[i]) for i in ids])
