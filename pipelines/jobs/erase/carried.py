"""The evidence of an in-place erase's segment swaps on Kafka's tiered storage, kept beside the
swap journal from before a swap's first metadata record until the swap is resolved: a run killed
midway leaves, per segment it was swapping, what the swap removes (per key digest: records,
offsets), and the run that finishes that swap reports it as its own, saying that the work spanned
two runs. A swap undone, or one whose evidence names no journalled swap, carries nothing: the
segment still holds its records, and the run erasing it counts them itself."""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from pipelines.jobs.erase.evidence import EraseReport, PartitionErasure
from pipelines.jobs.erase.segment import SegmentErasure
from segment_io.layout import KAFKA_TIER_EVIDENCE, META_DIR
from segment_io.storage.base import Storage

Log = Callable[[str], Any]


@dataclass(frozen=True)
class SegmentEvidence:
    """What one swap removes from its old segment, as the run that planned it found."""

    run_id: str
    secret: str | None  # the fingerprint of the secret its digests are under (None: made for that run)
    partition: str
    segment: str  # the old segment's id
    source: str
    records_erased: int
    bytes_in: int
    bytes_out: int
    batches_rewritten: int
    batches_emptied: int
    batches_dropped: int
    keys: tuple[tuple[str, int, int, int], ...]  # per key: digest, records, first and last offset

    @classmethod
    def of(
        cls,
        run_id: str,
        secret: str | None,
        partition: str,
        segment: str,
        result: SegmentErasure,
        digests: Sequence[str] | Mapping[int, str],
    ) -> SegmentEvidence:
        keys = tuple(
            (digests[e], n, lo, hi)
            for e, n, lo, hi in zip(
                result.entries.tolist(),
                result.counts.tolist(),
                result.first_offset.tolist(),
                result.last_offset.tolist(),
                strict=True,
            )
        )
        return cls(
            run_id,
            secret,
            partition,
            segment,
            result.source,
            result.erased,
            result.bytes_in,
            result.bytes_out,
            result.batches_rewritten,
            result.batches_emptied,
            result.batches_dropped,
            keys,
        )


@dataclass(frozen=True)
class EvidenceStore:
    """One file per swap under `<root>/_segpipe/kafka-tier-evidence/`, named by its old segment."""

    storage: Storage
    root: str

    @property
    def directory(self) -> str:
        return posixpath.join(self.root, META_DIR, KAFKA_TIER_EVIDENCE)

    def _path(self, segment: str) -> str:
        return posixpath.join(self.directory, f"{segment}.json")

    def keep(self, items: Iterable[SegmentEvidence]) -> None:
        """Written before the swaps start: each swap's evidence is there before its first record."""
        self.storage.makedirs(self.directory)
        for item in items:
            self.storage.write_atomic(self._path(item.segment), json.dumps(asdict(item)).encode())

    def resolved(self, segments: Iterable[str]) -> None:
        """The swaps of these old segments are done or undone: their evidence is reported or void."""
        for segment in segments:
            self.storage.remove(self._path(segment))

    def all(self) -> dict[str, SegmentEvidence]:
        """Every kept evidence by old segment id (a half-written file of a killed run is none)."""
        if not self.storage.exists(self.directory):
            return {}
        found = {}
        for info in self.storage.list(self.directory):
            if not info.name.endswith(".json"):
                continue
            doc = json.loads(self.storage.read(info.path))
            item = SegmentEvidence(**{**doc, "keys": tuple(tuple(k) for k in doc["keys"])})
            found[item.segment] = item
        return found


def settle_evidence(store: EvidenceStore, journalled: set[str], listed: set[str]) -> list[SegmentEvidence]:
    """After the earlier runs' swaps are resumed: the evidence this run carries. An evidence whose
    swap is still journalled stays for the run that resolves it; of the others, one whose old
    segment the metadata no longer lists (`listed`: the segment ids it lists as copied) was
    swapped away, and is carried; one whose old segment is still listed was never swapped (a kill
    before its swap started, or the swap undone), and is void: removed."""
    carried: list[SegmentEvidence] = []
    void: list[SegmentEvidence] = []
    for segment, item in store.all().items():
        if segment in journalled:
            continue
        (void if segment in listed else carried).append(item)
    store.resolved(i.segment for i in void)
    return carried


def carry(report: EraseReport, carried: Sequence[SegmentEvidence], log: Log) -> None:
    """The swaps an earlier run started and this one finished, reported as this run's: their
    records in the partitions' totals; their keys merged with this run's by digest where both runs
    used the same secret, else listed under the earlier run with its own digests."""
    if not carried:
        return
    runs: dict[str, list[SegmentEvidence]] = {}
    for item in carried:
        runs.setdefault(item.run_id, []).append(item)
    earlier = []
    for run_id, items in sorted(runs.items()):
        same = items[0].secret is not None and items[0].secret == report.secret
        if same:
            _merge_keys(report, items)
        earlier.append(
            {
                "run_id": run_id,
                "segments": sorted(i.segment for i in items),
                "records_erased": sum(i.records_erased for i in items),
                "keys": "merged with this run's" if same else _keys_of(items),
            }
        )
        log(
            f"segpipe: the work spanned two runs: run {run_id} (stopped) erased "
            f"{sum(i.records_erased for i in items):,} records from {len(items)} segments whose swaps "
            "this run finished; they are counted in this report"
        )
    report.partitions = _totals(report.partitions, carried)
    report.kafka_tier = {**(report.kafka_tier or {}), "earlier_runs": earlier}


def _keys_of(items: Sequence[SegmentEvidence]) -> list[dict[str, Any]]:
    return [
        {
            "digest": d,
            "partition": i.partition,
            "records": n,
            "first_offset": lo,
            "last_offset": hi,
            "segments": [i.source],
        }
        for i in items
        for d, n, lo, hi in i.keys
    ]


def _merge_keys(report: EraseReport, items: Sequence[SegmentEvidence]) -> None:
    """Each carried key's records added to its entry (a new one for a key this run found nowhere)."""
    by_digest = {item["digest"]: item for item in report.erased}
    for i in items:
        for digest, n, lo, hi in i.keys:
            entry = by_digest.get(digest)
            if entry is None:
                entry = by_digest[digest] = {"digest": digest, "records": 0, "partitions": []}
                report.erased.append(entry)
            entry["records"] += n
            part = next((p for p in entry["partitions"] if p["partition"] == i.partition), None)
            if part is None:
                entry["partitions"].append(
                    {
                        "partition": i.partition,
                        "records": n,
                        "first_offset": lo,
                        "last_offset": hi,
                        "segments": [i.source],
                    }
                )
                continue
            part["records"] += n
            part["first_offset"], part["last_offset"] = (
                min(part["first_offset"], lo),
                max(part["last_offset"], hi),
            )
            part["segments"] = sorted({*part["segments"], i.source})
    if report.not_found_files is None:  # a joined list's files of keys found nowhere stay the join's
        found = {d for i in items for d, *_ in i.keys}
        report.not_found = [d for d in report.not_found if d not in found]
        report.not_found_count = len(report.not_found)


def _totals(partitions: list[PartitionErasure], carried: Sequence[SegmentEvidence]) -> list[PartitionErasure]:
    """Each partition's totals as over both runs: the carried records counted as erased (and as
    read: this run read their segments' successors), their segments as rewritten."""
    by_name = {p.partition: p for p in partitions}
    for i in carried:
        p = by_name.get(i.partition) or PartitionErasure(i.partition, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        by_name[i.partition] = replace(
            p,
            segments_rewritten=p.segments_rewritten + 1,
            records_in=p.records_in + i.records_erased,
            records_erased=p.records_erased + i.records_erased,
            batches_rewritten=p.batches_rewritten + i.batches_rewritten,
            batches_emptied=p.batches_emptied + i.batches_emptied,
            batches_dropped=p.batches_dropped + i.batches_dropped,
            bytes_in=p.bytes_in + i.bytes_in - i.bytes_out,
        )
    known = {p.partition for p in partitions}
    return [by_name[p.partition] for p in partitions] + [p for n, p in by_name.items() if n not in known]
