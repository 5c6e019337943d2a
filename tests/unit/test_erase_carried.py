"""The evidence of a Kafka-tier erase's swaps carried over a kill: kept before the swaps start,
carried by the run that finds the old segment gone, void where it is still listed, merged into
the report by key digest where both runs used the same secret."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipelines.jobs.erase.carried import EvidenceStore, SegmentEvidence, carry, settle_evidence
from pipelines.jobs.erase.evidence import EraseReport, PartitionErasure
from pipelines.jobs.erase.segment import SegmentErasure
from segment_io.storage import LocalStorage

pytestmark = pytest.mark.unit


def result(
    source: str, entries: list[int], counts: list[int], first: list[int], last: list[int]
) -> SegmentErasure:
    arr = lambda xs: np.array(xs, np.int64)  # noqa: E731
    return SegmentErasure(
        0,
        0,
        source,
        True,
        1000,
        800,
        50,
        sum(counts),
        3,
        1,
        0,
        arr(entries),
        arr(counts),
        arr(first),
        arr(last),
    )


def test_evidence_round_trips_and_settles_by_what_the_metadata_lists(tmp_path: Path) -> None:
    store = EvidenceStore(LocalStorage(), str(tmp_path))
    digests = ["d-alice", "d-bob"]
    items = [
        SegmentEvidence.of(
            "run1", "fp", "t-0", seg, result(f"/{seg}.log", [0, 1], [2, 1], [10, 12], [11, 12]), digests
        )
        for seg in ("swapped", "journalled", "never-swapped")
    ]
    store.keep(items)
    assert store.all() == {i.segment: i for i in items}
    assert items[0].keys == (("d-alice", 2, 10, 11), ("d-bob", 1, 12, 12))
    carried = settle_evidence(store, journalled={"journalled"}, listed={"never-swapped", "other"})
    assert carried == [items[0]]  # its old segment is gone: its swap removed those records
    assert set(store.all()) == {"swapped", "journalled"}  # the void one removed, the carried kept
    store.resolved(["swapped"])
    assert set(store.all()) == {"journalled"}


def report(secret: str | None) -> EraseReport:
    r = EraseReport("src", "src", "run2", 3, secret=secret)
    r.partitions = [PartitionErasure("t-0", 4, 1, 100, 5, 1, 0, 0, 4000, 3900)]
    r.erased = [
        {
            "digest": "d-alice",
            "records": 5,
            "partitions": [
                {
                    "partition": "t-0",
                    "records": 5,
                    "first_offset": 40,
                    "last_offset": 60,
                    "segments": ["/b.log"],
                }
            ],
        }
    ]
    r.not_found, r.not_found_count = ["d-bob", "d-carol"], 2
    return r


def test_carried_evidence_is_merged_by_digest_under_the_same_secret() -> None:
    said: list[str] = []
    r = report("fp")
    ev = SegmentEvidence.of(
        "run1",
        "fp",
        "t-0",
        "old-a",
        result("/a.log", [0, 1], [2, 1], [10, 12], [11, 12]),
        ["d-alice", "d-bob"],
    )
    carry(r, [ev], said.append)
    alice, bob = sorted(r.erased, key=lambda e: e["digest"])
    assert alice["records"] == 7 and alice["partitions"][0]["first_offset"] == 10
    assert alice["partitions"][0]["segments"] == ["/a.log", "/b.log"]
    assert bob == {
        "digest": "d-bob",
        "records": 1,
        "partitions": [
            {"partition": "t-0", "records": 1, "first_offset": 12, "last_offset": 12, "segments": ["/a.log"]}
        ],
    }
    assert r.not_found == ["d-carol"] and r.not_found_count == 1
    [p] = r.partitions
    assert (p.records_erased, p.records_in, p.records_out, p.segments_rewritten) == (8, 103, 95, 2)
    assert r.records_erased == 8
    assert r.kafka_tier == {
        "earlier_runs": [
            {"run_id": "run1", "segments": ["old-a"], "records_erased": 3, "keys": "merged with this run's"}
        ]
    }
    assert said == [
        "segpipe: the work spanned two runs: run run1 (stopped) erased 3 records from 1 segments "
        "whose swaps this run finished; they are counted in this report"
    ]
    assert "erased 8 records of 2 of the 3 listed keys" in r.totals_line()


def test_evidence_under_another_secret_is_listed_apart() -> None:
    r = report(None)  # this run's secret was made for it: the earlier digests cannot be matched
    ev = SegmentEvidence.of("run1", None, "t-0", "old-a", result("/a.log", [0], [2], [10], [11]), ["d-x"])
    carry(r, [ev], lambda line: None)
    assert [e["digest"] for e in r.erased] == ["d-alice"] and r.not_found_count == 2
    [earlier] = r.kafka_tier["earlier_runs"]  # type: ignore[index]
    assert earlier["keys"] == [
        {
            "digest": "d-x",
            "partition": "t-0",
            "records": 2,
            "first_offset": 10,
            "last_offset": 11,
            "segments": ["/a.log"],
        }
    ]
    assert r.records_erased == 7
