"""The proof of an erase, from the data alone (validate --erased, erase --validate): no record of
OUT carries a listed key (or a listed value in a named header), and OUT holds exactly SRC's
records without those: per partition, record by record in offset order, the same offset,
timestamp and bytes from the offset delta on (key, value, headers), and per batch the same
producer fields, codec and kind. The erase's report and manifest are never read: what SRC allows
is recomputed from SRC and the key list."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import numpy as np

from pipelines.jobs.erase.join import ListedRecords, run_joined
from pipelines.keys.key_list import KeyList
from pipelines.keys.key_set import ErasedKeys, matched_entries
from pipelines.log.scanned import SCAN_TASKS_PER_CORE
from pipelines.runtime.spark_handle import Spark
from pipelines.runtime.tasks import DRIVER_COMPACT_BYTES, run_packed
from segment_io.format import records as rec
from segment_io.layout import LogDirListing, SegmentFiles, list_log_dir
from segment_io.remote.view import log_location
from segment_io.segment.framing import Framed, chunk_batches
from segment_io.segment.reader import SegmentReader
from segment_io.segment.scan import BatchTable
from segment_io.segment.sections import Arena
from segment_io.storage import Location, Place


@dataclass(frozen=True)
class PairTask:
    """One SRC segment and the OUT segment of the same base offset."""

    partition: str
    src_log: Location
    out_log: Location
    src: SegmentFiles
    out: SegmentFiles
    # Each side's records carrying a listed key, found by the key join (jobs/erase/join.py);
    # None: the task matches them against the proof's keys itself.
    src_listed: ListedRecords | None = None
    out_listed: ListedRecords | None = None


@dataclass(frozen=True)
class ErasureVerdict:
    """One partition's proof: how many OUT records still carry a listed key, how many records
    SRC lost to the erase, and what differs beyond that (None: nothing)."""

    partition: str
    listed_left: int
    erased: int
    problem: str | None

    @property
    def ok(self) -> bool:
        return self.listed_left == 0 and self.problem is None


@dataclass(frozen=True)
class _Proof:
    keys: ErasedKeys | None  # None: the key join found each side's listed records
    header_names: ErasedKeys | None

    def listed(self, framed: Framed, joined: ListedRecords | None) -> np.ndarray:
        """Whether each framed record carries a listed key (or a listed value in a named header)."""
        if joined is not None:
            return joined.entries_of(framed.offset) >= 0
        assert self.keys is not None
        return matched_entries(framed, self.keys, self.header_names) >= 0


def prove_erasure(
    spark: Spark,
    out_log: Place,
    src_log: Place,
    keys: ErasedKeys | KeyList,
    header_names: ErasedKeys | None,
    topics: Callable[[str], bool] | None = None,
) -> list[ErasureVerdict]:
    """One verdict per partition of SRC (of the `topics` selected: erase --topic) or OUT; a
    partition in one only is a problem. A key list too large to hand every task is joined with
    both sides' records (jobs/erase/join.py)."""
    out, src = log_location(out_log), log_location(src_log)  # either may be a remote tier
    out_listing = list_log_dir(out.storage, out.path, allow_incomplete=True)
    src_listing = list_log_dir(src.storage, src.path)
    filtered_out: set[str] = set()
    if topics is not None:
        filtered_out = {str(p.tp) for p in src_listing.partitions if not topics(p.tp.topic)}
        src_listing = replace(
            src_listing, partitions=tuple(p for p in src_listing.partitions if topics(p.tp.topic))
        )
    verdicts, tasks = _pair(out_listing, src_listing, out, src, filtered_out)
    results = prove_pairs(spark, tasks, keys, header_names, out.near and src.near)
    by_partition: dict[str, list[ErasureVerdict]] = {}
    for r in results:
        by_partition.setdefault(r.partition, []).append(r)
    for name, rs in sorted(by_partition.items()):
        problems = [r.problem for r in rs if r.problem]
        verdicts.append(
            ErasureVerdict(
                name,
                sum(r.listed_left for r in rs),
                sum(r.erased for r in rs),
                problems[0] if problems else None,
            )
        )
    return sorted(verdicts, key=lambda v: v.partition)


def prove_pairs(
    spark: Spark,
    tasks: list[PairTask],
    keys: ErasedKeys | KeyList,
    header_names: ErasedKeys | None,
    near: bool,
) -> list[ErasureVerdict]:
    """One verdict per segment pair, in any order (`near`: both sides on a local disk)."""
    if isinstance(keys, KeyList) and keys.broadcast:
        keys = keys.read()
    sizes = [t.src.size + t.out.size for t in tasks]
    if isinstance(keys, ErasedKeys):
        proof = _Proof(keys, header_names)
        return run_packed(
            spark,
            tasks,
            sizes,
            SCAN_TASKS_PER_CORE,
            lambda pack: [compare_pair(t, proof) for t in pack],
            near,
            DRIVER_COMPACT_BYTES,
        )
    joined = _Proof(None, header_names)
    results, _ = run_joined(
        spark,
        keys,
        header_names,
        tasks,
        lambda t: [(t.src_log, t.src), (t.out_log, t.out)],
        sizes,
        SCAN_TASKS_PER_CORE,
        lambda t, listed: compare_pair(replace(t, src_listed=listed[0], out_listed=listed[1]), joined),
    )
    return results


def _pair(
    out_listing: LogDirListing,
    src_listing: LogDirListing,
    out_log: Location,
    src_log: Location,
    filtered_out: set[str],
) -> tuple[list[ErasureVerdict], list[PairTask]]:
    """Segments paired by base offset (an erase keeps every segment under its base offset); what
    cannot be paired is a verdict already (`filtered_out`: SRC's partitions the topic filter left
    out, which an output partition is told apart from one SRC lacks by)."""
    outs = {str(p.tp): p for p in out_listing.partitions}
    srcs = {str(p.tp): p for p in src_listing.partitions}
    verdicts: list[ErasureVerdict] = []
    tasks: list[PairTask] = []
    for name in sorted(outs.keys() - srcs.keys()):
        problem = (
            "the partition is in SRC, but --topic leaves its topic out"
            if name in filtered_out
            else "the partition is not in SRC"
        )
        verdicts.append(ErasureVerdict(name, 0, 0, problem))
    for name in sorted(srcs.keys() - outs.keys()):
        verdicts.append(ErasureVerdict(name, 0, 0, "the partition is missing from the output"))
    for name in sorted(outs.keys() & srcs.keys()):
        out_segments = {s.base_offset: s for s in outs[name].segments}
        src_segments = {s.base_offset: s for s in srcs[name].segments}
        if out_segments.keys() != src_segments.keys():
            missing = sorted(src_segments.keys() - out_segments.keys())
            extra = sorted(out_segments.keys() - src_segments.keys())
            detail = f"segments differ from SRC's (missing base offsets {missing[:5]}, extra {extra[:5]})"
            verdicts.append(ErasureVerdict(name, 0, 0, detail))
            continue
        tasks += [
            PairTask(name, src_log, out_log, src_segments[b], out_segments[b]) for b in sorted(src_segments)
        ]
    return verdicts, tasks


def compare_pair(task: PairTask, proof: _Proof) -> ErasureVerdict:
    """Executed on a worker: one segment pair, chunk by chunk of SRC (an OUT batch keeps its SRC
    batch's last offset, so each chunk's OUT batches are found from its last offsets)."""
    src = SegmentReader(task.src_log.storage, task.src.log.path, task.src.base_offset)
    out = SegmentReader(task.out_log.storage, task.out.log.path, task.out.base_offset)
    st, ot = src.scan().table, out.scan().table
    listed_left = erased = 0
    src_arena, out_arena = Arena(), Arena()
    matched_out = 0
    for index in chunk_batches(st):
        # An OUT batch belongs to the SRC batch whose offsets hold its last one: the same last offset,
        # or (a filtered magic 0/1 entry, converted) at most it and above the batch before it.
        before = int(st.last_offset[index[0] - 1]) if index[0] > 0 else -1
        lo = int(np.searchsorted(ot.last_offset, before, side="right"))
        hi = int(np.searchsorted(ot.last_offset, st.last_offset[index[-1]], side="right"))
        out_index = np.arange(lo, hi, dtype=np.int64)
        paired = np.searchsorted(st.last_offset[index], ot.last_offset[out_index])
        pair_src = index[np.minimum(paired, len(index) - 1)]
        converted = (st.magic[pair_src] < 2) & (ot.magic[out_index] == 2)
        same_end = st.last_offset[pair_src] == ot.last_offset[out_index]
        if len(out_index) and (not (same_end | converted).all() or len(np.unique(pair_src)) != len(pair_src)):
            return ErasureVerdict(task.partition, 0, 0, f"{task.out.log.path}: a batch SRC does not have")
        problem = _batch_fields(st, ot, pair_src, out_index)
        if problem:
            return ErasureVerdict(task.partition, 0, 0, f"{task.out.log.path}: {problem}")
        matched_out += len(out_index)
        sf = src.frame(index, src_arena)
        of = out.frame(out_index, out_arena)
        src_control = st.is_control[index][sf.record_batch]
        out_control = ot.is_control[out_index][of.record_batch]
        gone = proof.listed(sf, task.src_listed) & ~src_control
        listed_left += int((proof.listed(of, task.out_listed) & ~out_control).sum())
        erased += int(gone.sum())
        legacy = st.magic[index][sf.record_batch] < 2
        problem = _records_differ(sf, np.flatnonzero(~gone), of, legacy)
        if problem:
            return ErasureVerdict(task.partition, listed_left, erased, f"{task.out.log.path}: {problem}")
    if matched_out != len(ot):
        return ErasureVerdict(
            task.partition, listed_left, erased, f"{task.out.log.path}: a batch SRC does not have"
        )
    return ErasureVerdict(task.partition, listed_left, erased, None)


def _batch_fields(st: BatchTable, ot: BatchTable, src_index: np.ndarray, out_index: np.ndarray) -> str | None:
    """Paired batches keep their kind, producer fields, codec and base offset; a magic 0/1 entry
    the erase filtered is a v2 batch starting at its first kept record (as Kafka's cleaner
    converts one), every other field kept."""
    converted = (st.magic[src_index] < 2) & (ot.magic[out_index] == 2)
    for name in ("base_offset", "producer_id", "producer_epoch", "base_sequence", "is_control", "magic"):
        a, b = getattr(st, name)[src_index], getattr(ot, name)[out_index]
        if name in ("base_offset", "magic"):
            a, b = a[~converted], b[~converted]
        if not np.array_equal(a, b):
            at = int(np.flatnonzero(a != b)[0])
            return f"the batch ending at offset {int(ot.last_offset[out_index[at]])} has another {name}"
    # An emptied batch (no records left) carries no codec: only batches with records are compared.
    kept = ot.records_count[out_index] > 0
    if not np.array_equal(st.codec[src_index][kept], ot.codec[out_index][kept]):
        return "a batch is written in another codec than SRC's"
    return None


def _records_differ(sf: Framed, kept: np.ndarray, of: Framed, legacy: np.ndarray) -> str | None:
    """Whether OUT's records are exactly SRC's `kept` ones: offsets, timestamps, record bodies (of
    a record from a magic 0/1 entry, `legacy`, which a filtered entry re-encodes as a v2 record:
    its key and value, and no header)."""
    if len(kept) != len(of):
        extra = np.setdiff1d(of.offset, sf.offset[kept])
        missing = np.setdiff1d(sf.offset[kept], of.offset)
        if len(missing):
            return f"the record at offset {int(missing[0])} is missing (not a listed key's)"
        return f"the record at offset {int(extra[0])} should have been erased"
    if not np.array_equal(sf.offset[kept], of.offset):
        at = int(np.flatnonzero(sf.offset[kept] != of.offset)[0])
        return f"the record at offset {int(of.offset[at])} is not SRC's at that place"
    if not np.array_equal(sf.timestamp[kept], of.timestamp):
        at = int(np.flatnonzero(sf.timestamp[kept] != of.timestamp)[0])
        return f"the record at offset {int(of.offset[at])} has another timestamp"
    old = legacy[kept]
    if old.any():
        first = int(of.offset[np.flatnonzero(old)[0]])
        fields = [
            (sf.key_start, sf.key_len, of.key_start, of.key_len),
            (sf.value_start, sf.value_len, of.value_start, of.value_len),
        ]
        for s_start, s_len, o_start, o_len in fields:
            a = _field(sf, s_start[kept[old]], s_len[kept[old]])
            b = _field(of, o_start[old], o_len[old])
            if not all(np.array_equal(x, y) for x, y in zip(a, b, strict=True)):
                return f"a record from offset {first} on has other key or value bytes than SRC's"
        if (of.header_count[old] != 0).any():
            return f"a record from offset {first} on has headers its magic 0/1 message had not"
    kept, out_rows = kept[~old], np.flatnonzero(~old)
    src_bodies = _bodies(sf, kept)
    out_bodies = _bodies(of, out_rows)
    if not (np.array_equal(src_bodies[0], out_bodies[0]) and np.array_equal(src_bodies[1], out_bodies[1])):
        lengths_a, lengths_b = np.diff(src_bodies[0]), np.diff(out_bodies[0])
        differ = np.flatnonzero(lengths_a != lengths_b)
        at = int(differ[0]) if len(differ) else _first_content_difference(src_bodies, out_bodies)
        return f"the record at offset {int(of.offset[out_rows[at]])} has other bytes (key, value or headers)"
    return None


def _field(framed: Framed, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, ...]:
    """A field of some records: its lengths (−1: null) and its bytes, packed."""
    offsets, data = rec.gather(framed.sections.data, starts, lengths)
    return lengths, offsets, data


def _bodies(framed: Framed, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The bytes of each record from its offset delta to its end, packed (Arrow-style offsets)."""
    starts = framed.body_start[rows]
    return rec.gather(framed.sections.data, starts, framed.record_end[rows] - starts)


def _first_content_difference(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> int:
    """The first record whose bytes differ (lengths equal)."""
    where = int(np.flatnonzero(a[1] != b[1])[0])
    return int(np.searchsorted(a[0], where, side="right") - 1)


def failures(verdicts: list[ErasureVerdict]) -> Iterator[str]:
    """A line per partition whose proof fails."""
    for v in verdicts:
        if v.listed_left:
            yield f"{v.partition}: {v.listed_left} records still carry a listed key"
        if v.problem:
            yield f"{v.partition}: {v.problem}"
