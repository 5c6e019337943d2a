"""An erase's report: the evidence of what it removed, without the keys. Each listed key is named
by the HMAC-SHA-256 of its bytes under the operator's secret (keys/key_digest.py), which the
report names by a fingerprint only; per key, the records removed and from which partitions and offset
ranges; the keys found nowhere; per partition, the totals; the run's identity."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipelines.jobs.erase.segment import SegmentErasure
from pipelines.keys.key_digest import DIGEST, KeyDigest
from pipelines.keys.key_list import KeyList
from pipelines.keys.key_notes import nowhere_warning
from pipelines.keys.key_set import ErasedKeys


@dataclass(frozen=True)
class PartitionErasure:
    """One partition's totals."""

    partition: str
    segments: int
    segments_rewritten: int
    records_in: int
    records_erased: int
    batches_rewritten: int
    batches_emptied: int
    batches_dropped: int
    bytes_in: int
    bytes_out: int

    @property
    def records_out(self) -> int:
        return self.records_in - self.records_erased


@dataclass
class EraseReport:
    """The report of one erase run (`to_dict()`: what DST/_segpipe/report.json and --report hold)."""

    src: str
    dst: str
    run_id: str
    keys_listed: int
    dry_run: bool = False
    header_names: tuple[str, ...] = ()
    erased: list[dict[str, Any]] = field(default_factory=list)  # per key digest that matched
    not_found: list[str] = field(default_factory=list)  # digests of listed keys found nowhere
    not_found_count: int = 0
    # Where a joined list's digests of keys found nowhere are (files of one digest per line), in
    # place of `not_found`: no process ever holds them all.
    not_found_files: list[str] | None = None
    partitions: list[PartitionErasure] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    seconds_total: float = 0.0
    seconds_by_stage: dict[str, float] = field(default_factory=dict)
    secret: str | None = None  # the fingerprint of the operator's secret (None: one made for the run)
    # The copies of the listed keys' records the run knows remain (SRC, which an erase never changes;
    # for a remote tier, its replaced objects and the log directory it was uploaded from).
    remaining_copies: list[str] = field(default_factory=list)
    # erase --in-place on Kafka's tiered storage: the segments swapped (each replaced id and its
    # successor), the partitions left as they were and why, the local segments not yet tiered.
    kafka_tier: dict[str, Any] | None = None

    @property
    def records_erased(self) -> int:
        return sum(p.records_erased for p in self.partitions)

    def totals_line(self) -> str:
        verb = "would erase" if self.dry_run else "erased"
        found = len(self.erased)
        return (
            f"segpipe: {verb} {self.records_erased:,} records of {found:,} of the {self.keys_listed:,} "
            f"listed keys from {len(self.partitions)} partitions; {self.not_found_count:,} keys found nowhere"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "src": self.src,
            "dst": self.dst,
            "dry_run": self.dry_run,
            "key_digest": DIGEST,
            "secret": self.secret if self.secret is not None else "made for this run, kept nowhere",
            "keys_listed": self.keys_listed,
            "header_names": list(self.header_names),
            "records_erased": self.records_erased,
            "erased": self.erased,
            "not_found": None if self.not_found_files is not None else self.not_found,
            "not_found_count": self.not_found_count,
            "not_found_files": self.not_found_files,
            "partitions": [{**vars(p), "records_out": p.records_out} for p in self.partitions],
            "remaining_copies": self.remaining_copies,
            **({"kafka_tier": self.kafka_tier} if self.kafka_tier is not None else {}),
            "skipped": self.skipped,
            "seconds_total": round(self.seconds_total, 3),
            "seconds_by_stage": {k: round(v, 3) for k, v in self.seconds_by_stage.items()},
        }


def say_totals(report: EraseReport, keys: str, key_format: str, log: Callable[[str], Any]) -> None:
    """The run's totals line; where none of the listed keys was found, a warning of the key format
    they were read in and what they look like (a list in the wrong format erases nothing)."""
    log(report.totals_line())
    if report.keys_listed and report.not_found_count >= report.keys_listed:
        log(nowhere_warning(report.keys_listed, key_format, KeyList.open(keys, key_format).samples()))


def partition_totals(names: list[str], results: list[SegmentErasure]) -> list[PartitionErasure]:
    """Per partition of the run (`names`, by index), its segments' figures summed."""
    mine: list[list[SegmentErasure]] = [[] for _ in names]
    for r in results:
        mine[r.partition].append(r)
    return [
        PartitionErasure(
            partition=name,
            segments=len(rs),
            segments_rewritten=sum(r.rewritten for r in rs),
            records_in=sum(r.records_in for r in rs),
            records_erased=sum(r.erased for r in rs),
            batches_rewritten=sum(r.batches_rewritten for r in rs),
            batches_emptied=sum(r.batches_emptied for r in rs),
            batches_dropped=sum(r.batches_dropped for r in rs),
            bytes_in=sum(r.bytes_in for r in rs),
            bytes_out=sum(r.bytes_out for r in rs),
        )
        for name, rs in zip(names, mine, strict=True)
    ]


def key_evidence(
    names: list[str], digests: Sequence[str] | Mapping[int, str], results: list[SegmentErasure]
) -> tuple[list[dict[str, Any]], list[str]]:
    """Per listed key that matched (by entry: list order, or key id where the list was joined):
    its digest, the records removed, and per partition the count and the first and last offset
    removed; then the digests of `digests` that matched nothing."""
    if not any(len(r.entries) for r in results):
        return [], list(digests.values() if isinstance(digests, Mapping) else digests)
    entry = np.concatenate([r.entries for r in results])
    part = np.concatenate([np.full(len(r.entries), r.partition, np.int64) for r in results])
    count = np.concatenate([r.counts for r in results])
    first = np.concatenate([r.first_offset for r in results])
    last = np.concatenate([r.last_offset for r in results])
    order = np.lexsort((part, entry))
    entry, part, count, first, last = entry[order], part[order], count[order], first[order], last[order]
    # One row per (key, partition): its segments' rows summed, their ranges joined.
    starts = np.flatnonzero(np.concatenate([[True], (np.diff(entry) != 0) | (np.diff(part) != 0)]))
    rows = zip(
        entry[starts].tolist(),
        part[starts].tolist(),
        np.add.reduceat(count, starts).tolist(),
        np.minimum.reduceat(first, starts).tolist(),
        np.maximum.reduceat(last, starts).tolist(),
        strict=True,
    )
    # The segments that held each key (a matched key per segment, not a record, per step).
    holding: dict[tuple[int, int], list[str]] = {}
    for r in results:
        for e in r.entries.tolist():
            holding.setdefault((e, r.partition), []).append(r.source)
    found: dict[int, dict[str, Any]] = {}
    for e, p, n, lo, hi in rows:
        item = found.setdefault(e, {"digest": digests[e], "records": 0, "partitions": []})
        item["records"] += n
        item["partitions"].append(
            {
                "partition": names[p],
                "records": n,
                "first_offset": lo,
                "last_offset": hi,
                "segments": sorted(holding[(e, p)]),
            }
        )
    listed = digests.items() if isinstance(digests, Mapping) else enumerate(digests)
    return [found[e] for e in sorted(found)], [d for e, d in listed if e not in found]


def evidence_problems(
    doc: dict[str, Any], listed: ErasedKeys | KeyList, digest: KeyDigest, read: Callable[[str], bytes]
) -> list[str]:
    """What is wrong with an erase report's evidence for the keys `listed`, to the holder of the
    secret `digest`: keyed with another secret, a digest that names no listed key, listed keys
    missing from it. `read(name)` reads a file the report names (its digests of keys found
    nowhere), relative to the output."""
    if doc.get("key_digest") != DIGEST:
        return [f"the report names keys by {doc.get('key_digest')!r}, not by {DIGEST} under a secret"]
    if doc.get("secret") != digest.fingerprint:
        return ["the report was keyed with another secret (its fingerprint differs from --secret-file's)"]
    keys = listed if isinstance(listed, ErasedKeys) else listed.read()
    want = set(keys.digests(digest))
    found = [item["digest"] for item in doc.get("erased", [])]
    missing = list(doc.get("not_found") or [])
    for name in doc.get("not_found_files") or []:
        missing += read(name).decode("ascii").split()
    problems = []
    strangers = (set(found) | set(missing)) - want
    if strangers:
        problems.append(f"{len(strangers)} digests of the report name no listed key")
    unnamed = want - set(found) - set(missing)
    if unnamed:
        problems.append(f"{len(unnamed)} listed keys are named nowhere in the report")
    if len(found) != len(set(found)) or set(found) & set(missing):
        problems.append("a key is named twice in the report")
    return problems
