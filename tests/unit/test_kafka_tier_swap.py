"""A remote segment swapped for its rewritten successor while the cluster serves it, a rule per
test: the records in the broker's order, the grace period before the old segment's deletion
starts, every check that leaves a segment as it was, a failed send and a killed run finished or
undone by the next, from the metadata itself. The cluster here is a replay of what was sent
(segment_io.kafka_tier.metadata_cache, the broker's cache rules) with a clock that only counts."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from pipelines.kafka_tier.swap import SwapOutcome, Swapper, new_segment_id, successor
from pipelines.kafka_tier.swap_journal import Journal, Swap
from segment_io.errors import KafkaTierCorrupt, KafkaTierPublishFailed
from segment_io.kafka_tier.local_tiered import LocalTieredStore
from segment_io.kafka_tier.metadata import (
    MetadataRecord,
    SegmentMetadata,
    SegmentState,
    SegmentUpdate,
    TopicIdPartition,
)
from segment_io.kafka_tier.metadata_cache import MetadataReplay, remote_log
from segment_io.kafka_tier.objects import SuccessorFiles
from segment_io.storage import LocalStorage
from segment_io.storage.base import Checksum

pytestmark = pytest.mark.unit
TP = TopicIdPartition("orders", "AAAAAAAAAAAAAAAAAAAAAQ", 0)
S = SegmentState
GRACE = 30_000
T0 = 1_700_000_000_000


@dataclass
class Clock:
    """Counts; `meanwhile` runs during a wait (what the world does in the grace period)."""

    now: int = T0
    slept: list[int] = field(default_factory=list)
    meanwhile: Callable[[], None] = lambda: None

    def now_ms(self) -> int:
        return self.now

    def sleep_ms(self, ms: int) -> None:
        self.slept.append(ms)
        self.now += ms
        self.meanwhile()


@dataclass
class Cluster:
    """Records sent land in the topic (and the replay) at once; `fail_at` refuses that send."""

    topic: list[MetadataRecord]
    epoch: int = 5
    fail_at: int | None = None
    sent: list[MetadataRecord] = field(default_factory=list)

    def publish(self, record: MetadataRecord) -> None:
        if self.fail_at is not None and len(self.sent) == self.fail_at:
            raise KafkaTierPublishFailed("no acknowledgement")
        self.sent.append(record)
        self.topic.append(record)

    def replay(self) -> MetadataReplay:
        return MetadataReplay.of(self.topic)

    def leader_epoch(self, tp: TopicIdPartition) -> int | None:
        return self.epoch

    def topic_config(self, topic: str, name: str) -> str | None:
        return None


def seg(seg_id: str, start: int, end: int, state: SegmentState = S.COPY_SEGMENT_STARTED) -> SegmentMetadata:
    return SegmentMetadata(TP, seg_id, start, end, 1, T0 - 5, T0 - 10, ((3, start),), 300, None, state)


def finished(s: SegmentMetadata, at: int = T0 - 9) -> SegmentUpdate:
    return SegmentUpdate(TP, s.segment_id, 1, at, None, S.COPY_SEGMENT_FINISHED)


OLD_A, OLD_B = seg(new_segment_id(), 0, 99), seg(new_segment_id(), 100, 199)
FILES = {"log": b"L" * 200, "index": b"", "timeindex": b"", "snapshot": b"S", "leader-epoch": b"0\n1\n3 0\n"}


def tier(tmp_path: Path) -> tuple[Cluster, LocalTieredStore, Clock]:
    store = LocalTieredStore(LocalStorage(), str(tmp_path))
    for old in (OLD_A, OLD_B):
        store.upload(old, SuccessorFiles.held({**FILES, "log": b"O" * old.size}))
    return Cluster([OLD_A, finished(OLD_A), OLD_B, finished(OLD_B)]), store, Clock()


def planned(old: SegmentMetadata, clock: Clock) -> Swap:
    return Swap(old, successor(old, new_segment_id(), len(FILES["log"]), T0 - 6, clock.now_ms()))


def swapper(cluster: Cluster, store: LocalTieredStore, clock: Clock) -> Swapper:
    return Swapper(cluster, store, clock, GRACE)


def load(files: Mapping[str, bytes] = FILES) -> SuccessorFiles:
    return SuccessorFiles.held(files)


def served(cluster: Cluster) -> list[str]:
    state = cluster.replay().partitions[TP]
    return [s.segment_id for s in remote_log(state, [(3, 0)], None, "test")]


def test_the_records_go_in_the_brokers_order_with_the_grace_before_the_deletion(tmp_path: Path) -> None:
    cluster, store, clock = tier(tmp_path)
    swap = planned(OLD_A, clock)
    outcome = swapper(cluster, store, clock).run([(swap, load)], {TP: 5})
    assert [s.old.segment_id for s in outcome.done] == [OLD_A.segment_id]
    sent = [(r.segment_id, r.state) for r in cluster.sent]  # type: ignore[union-attr]
    new, old = swap.new.segment_id, OLD_A.segment_id
    assert sent == [
        (new, S.COPY_SEGMENT_STARTED),
        (new, S.COPY_SEGMENT_FINISHED),
        (old, S.DELETE_SEGMENT_STARTED),
        (old, S.DELETE_SEGMENT_FINISHED),
    ]
    finish, delete = cluster.sent[1].event_timestamp_ms, cluster.sent[2].event_timestamp_ms
    assert delete - finish >= GRACE and clock.slept == [GRACE]
    assert served(cluster) == [new, OLD_B.segment_id]
    # The successor's objects are the files given, the old segment's are gone, the journal empty.
    assert store.read_back(cluster.replay().partitions[TP].segments[new]) == Checksum.of(FILES["log"])
    assert not any(old in p.name for p in tmp_path.rglob("*") if p.is_file())
    assert list(Journal(store.storage, store.root).entries()) == []


def test_successors_upload_at_once_and_the_grace_is_waited_once(tmp_path: Path) -> None:
    """Swaps of several segments upload side by side (each waits here until the other is
    uploading too: one after the other, neither would finish), stream their logs in pieces, and
    go into service in order; one grace period covers them all."""
    import threading

    cluster, store, clock = tier(tmp_path)
    both = threading.Barrier(2, timeout=10)
    pieces = [FILES["log"][i : i + 7] for i in range(0, len(FILES["log"]), 7)]

    def side_by_side() -> SuccessorFiles:
        both.wait()
        return SuccessorFiles(iter(pieces), {k: v for k, v in FILES.items() if k != "log"})

    swaps = [planned(OLD_A, clock), planned(OLD_B, clock)]
    outcome = replace(swapper(cluster, store, clock), uploads_at_once=2).run(
        [(swap, side_by_side) for swap in swaps], {TP: 5}
    )
    assert [s.new.segment_id for s in outcome.done] == [s.new.segment_id for s in swaps]
    assert served(cluster) == [s.new.segment_id for s in swaps] and clock.slept == [GRACE]
    for swap in swaps:
        assert store.read_back(swap.new) == Checksum.of(FILES["log"])
    states = [(r.segment_id, r.state) for r in cluster.sent]  # type: ignore[union-attr]
    a, b = (s.new.segment_id for s in swaps)
    assert states[:4] == [
        (a, S.COPY_SEGMENT_STARTED),
        (b, S.COPY_SEGMENT_STARTED),
        (a, S.COPY_SEGMENT_FINISHED),
        (b, S.COPY_SEGMENT_FINISHED),
    ]


def test_a_successor_that_reads_back_shorter_than_planned_is_never_served(tmp_path: Path) -> None:
    """The log sent is checked against the size the successor's metadata announces too: a staged
    log that changed after the plan (or a plan that misread it) is not served on its own word."""
    cluster, store, clock = tier(tmp_path)
    swap = planned(OLD_A, clock)
    with pytest.raises(KafkaTierCorrupt, match=r"150 bytes.*200"):
        swapper(cluster, store, clock).run([(swap, lambda: load({**FILES, "log": b"L" * 150}))], {TP: 5})
    assert served(cluster) == [OLD_A.segment_id, OLD_B.segment_id]


def test_the_successor_keeps_the_old_segments_offsets_epochs_and_broker() -> None:
    new = successor(OLD_A, "Zm9vYmFyYmF6cXV4cXV1dQ", 123, T0 - 50, T0)
    assert (new.tp, new.start_offset, new.end_offset, new.leader_epochs, new.broker_id) == (
        OLD_A.tp,
        OLD_A.start_offset,
        OLD_A.end_offset,
        OLD_A.leader_epochs,
        OLD_A.broker_id,
    )
    assert (new.size, new.max_timestamp_ms, new.state) == (123, T0 - 50, S.COPY_SEGMENT_STARTED)


def test_a_successor_at_the_end_of_its_epoch_is_served_in_place_of_the_old_one() -> None:
    # The broker's cache maps each epoch's start offset to the segment whose copy finished last
    # there, whether the segment ends the epoch (the superset rule) or not (a plain replacement).
    records: list[MetadataRecord] = [OLD_A, finished(OLD_A), OLD_B, finished(OLD_B)]
    for old in (OLD_B, OLD_A):
        new = successor(old, new_segment_id(), 10, T0, T0)
        records += [new, SegmentUpdate(TP, new.segment_id, 1, T0, None, S.COPY_SEGMENT_FINISHED)]
        state = MetadataReplay.of(records).partitions[TP]
        assert new.segment_id in [s.segment_id for s in remote_log(state, [(3, 0)], None, "t")]
        assert old.segment_id not in [s.segment_id for s in remote_log(state, [(3, 0)], None, "t")]


def test_an_old_segment_the_leader_expired_meanwhile_is_left_and_its_successor_withdrawn(
    tmp_path: Path,
) -> None:
    cluster, store, clock = tier(tmp_path)
    swap = planned(OLD_A, clock)

    def expire_while_uploading() -> SuccessorFiles:
        if not any(getattr(r, "state", None) is S.DELETE_SEGMENT_STARTED for r in cluster.topic):
            cluster.topic.append(SegmentUpdate(TP, OLD_A.segment_id, 1, T0, None, S.DELETE_SEGMENT_STARTED))
        return load()

    outcome = swapper(cluster, store, clock).run([(swap, expire_while_uploading)], {TP: 5})
    assert outcome.done == [] and "no longer served" in outcome.undone[0][1]
    new = swap.new.segment_id
    assert [(r.segment_id, r.state) for r in cluster.sent] == [  # type: ignore[union-attr]
        (new, S.COPY_SEGMENT_STARTED),
        (new, S.DELETE_SEGMENT_STARTED),
        (new, S.DELETE_SEGMENT_FINISHED),
    ]
    assert not any(new in p.name for p in tmp_path.rglob("*") if p.is_file())


def test_a_leader_epoch_that_moved_during_the_run_leaves_the_segment_as_it_was(tmp_path: Path) -> None:
    cluster, store, clock = tier(tmp_path)
    swap = planned(OLD_A, clock)
    outcome = swapper(cluster, store, clock).run([(swap, load)], {TP: 4})
    assert outcome.done == [] and "moved from 4 to 5" in outcome.undone[0][1]
    assert served(cluster) == [OLD_A.segment_id, OLD_B.segment_id]


class Damaging(LocalTieredStore):
    """A store whose objects come back other than they were written (a bad disk, a proxy)."""

    def upload(self, seg: SegmentMetadata, files: SuccessorFiles) -> bytes | None:
        return super().upload(seg, replace(files, log=[b"X" * len(b"".join(files.log))]))


def test_an_upload_that_does_not_read_back_is_never_served(tmp_path: Path) -> None:
    cluster, _, clock = tier(tmp_path)
    store = Damaging(LocalStorage(), str(tmp_path))
    swap = planned(OLD_A, clock)
    with pytest.raises(KafkaTierCorrupt, match="does not read back"):
        swapper(cluster, store, clock).run([(swap, load)], {TP: 5})
    assert served(cluster) == [OLD_A.segment_id, OLD_B.segment_id]


def test_an_old_segment_stays_while_its_successor_is_not_served(tmp_path: Path) -> None:
    # During the grace period someone withdraws the successor: the old segment must not go.
    cluster, store, clock = tier(tmp_path)
    swap = planned(OLD_A, clock)
    clock.meanwhile = lambda: cluster.topic.append(
        SegmentUpdate(TP, swap.new.segment_id, 1, clock.now, None, S.DELETE_SEGMENT_STARTED)
    )
    outcome = swapper(cluster, store, clock).run([(swap, load)], {TP: 5})
    assert [(s.old, why) for s, why in outcome.kept] == [
        (OLD_A, f"its successor {swap.new.segment_id} is not served at its offsets")
    ]
    assert not any(r.segment_id == OLD_A.segment_id for r in cluster.sent)  # type: ignore[union-attr]
    assert any(OLD_A.segment_id in p.name for p in tmp_path.rglob("*.log"))
    assert [s.old for s in Journal(store.storage, store.root).entries()] == [OLD_A]  # the next run decides
    # The next run finds the successor withdrawn: it closes the swap, and never removes the old
    # segment (whose objects are all that is left of those offsets).
    clock.meanwhile = lambda: None
    swapper(cluster, store, clock).resume(SwapOutcome())
    assert list(Journal(store.storage, store.root).entries()) == []
    assert not any(r.segment_id == OLD_A.segment_id for r in cluster.sent)  # type: ignore[union-attr]
    assert any(OLD_A.segment_id in p.name for p in tmp_path.rglob("*.log"))


def test_an_old_segment_stays_while_its_successors_objects_do_not_read_back(tmp_path: Path) -> None:
    cluster, store, clock = tier(tmp_path)
    swap = planned(OLD_A, clock)

    def lose_the_successor() -> None:
        for path in tmp_path.rglob(f"*{swap.new.segment_id}.log"):
            path.write_bytes(b"short")

    clock.meanwhile = lose_the_successor
    outcome = swapper(cluster, store, clock).run([(swap, load)], {TP: 5})
    assert len(outcome.kept) == 1 and "does not read back" in outcome.kept[0][1]
    assert any(OLD_A.segment_id in p.name for p in tmp_path.rglob("*.log"))
    assert not any(r.segment_id == OLD_A.segment_id for r in cluster.sent)  # type: ignore[union-attr]


@pytest.mark.parametrize("fail_at", [0, 1, 2, 3])
def test_a_send_that_fails_leaves_every_offset_served_and_the_next_run_finishes(
    fail_at: int, tmp_path: Path
) -> None:
    cluster, store, clock = tier(tmp_path)
    swap = planned(OLD_A, clock)
    cluster.fail_at = fail_at
    with pytest.raises(KafkaTierPublishFailed):
        swapper(cluster, store, clock).run([(swap, load)], {TP: 5})
    ids = served(cluster)
    assert len(ids) == 2 and ids[1] == OLD_B.segment_id  # offsets 0-99 served by the old or the new
    cluster.fail_at = None
    outcome = SwapOutcome()
    swapper(cluster, store, clock).resume(outcome)
    assert [s.old for s in outcome.resumed] == [OLD_A]
    # Served before the failure: finished (the old one retired); not yet: undone (the old kept).
    assert served(cluster) == [ids[0], OLD_B.segment_id]
    assert [s.old for s in outcome.finished] == ([OLD_A] if ids[0] == swap.new.segment_id else [])
    gone = OLD_A.segment_id if ids[0] == swap.new.segment_id else swap.new.segment_id
    assert not any(gone in p.name for p in tmp_path.rglob("*") if p.is_file())
    assert list(Journal(store.storage, store.root).entries()) == []


def test_an_upload_killed_half_way_leaves_nothing_once_the_next_run_undoes_it(tmp_path: Path) -> None:
    """A run killed while successors upload side by side leaves half-written files under their
    names (a temporary suffix): the next run's undo removes them with the rest of the successor,
    and nothing of another segment."""

    class Killed(Exception):
        pass

    class KilledMidway(LocalTieredStore):
        def upload(self, seg: SegmentMetadata, files: SuccessorFiles) -> bytes | None:
            directory = tmp_path / "kafka-tiered-storage" / f"{TP.topic}-{TP.partition}-{TP.topic_id}"
            (directory / f"{seg.start_offset:020d}-{seg.segment_id}.log.0123abcd.tmp").write_bytes(b"half")
            raise Killed

    cluster, store, clock = tier(tmp_path)
    swap = planned(OLD_A, clock)
    with pytest.raises(Killed):
        swapper(cluster, KilledMidway(LocalStorage(), str(tmp_path)), clock).run([(swap, load)], {TP: 5})
    assert any(swap.new.segment_id in p.name for p in tmp_path.rglob("*.tmp"))
    outcome = SwapOutcome()
    swapper(cluster, store, clock).resume(outcome)
    assert [s.old for s in outcome.resumed] == [OLD_A] and outcome.finished == []
    assert not any(swap.new.segment_id in p.name for p in tmp_path.rglob("*"))
    assert served(cluster) == [OLD_A.segment_id, OLD_B.segment_id]
    assert all(store.read_back(s).size == s.size for s in (OLD_A, OLD_B))


def test_a_resumed_swap_waits_only_what_is_left_of_the_grace(tmp_path: Path) -> None:
    cluster, store, clock = tier(tmp_path)
    swap = planned(OLD_A, clock)
    cluster.fail_at = 2  # the old segment's DELETE_SEGMENT_STARTED: the successor is served
    with pytest.raises(KafkaTierPublishFailed):
        swapper(cluster, store, clock).run([(swap, load)], {TP: 5})
    assert clock.slept == [GRACE]
    cluster.fail_at = None
    clock.now += 1_000
    swapper(cluster, store, clock).resume(SwapOutcome())
    assert clock.slept == [GRACE]  # the grace had passed already: no second wait
    assert served(cluster) == [swap.new.segment_id, OLD_B.segment_id]


def test_a_journal_entry_round_trips_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    swap = planned(OLD_A, Clock())
    assert Swap.from_json(swap.to_json(), "j") == swap
    with pytest.raises(KafkaTierCorrupt, match="does not parse"):
        Swap.from_json(b"{}", "j")


def test_a_segment_id_is_never_zero_nor_starts_with_a_dash() -> None:
    draws = iter([b"\xf8" + b"\0" * 15, b"\0" * 16, b"\0" * 15 + b"\1", b"\1" * 16])
    assert new_segment_id(lambda n: next(draws)) == "AQEBAQEBAQEBAQEBAQEBAQ"


def test_an_old_segment_a_new_leaders_superset_replaced_meanwhile_is_left(tmp_path: Path) -> None:
    cluster, store, clock = tier(tmp_path)
    swap = planned(OLD_A, clock)
    superset = seg(new_segment_id(), 0, 199)

    def superset_while_uploading() -> SuccessorFiles:
        if superset not in cluster.topic:
            cluster.topic += [superset, finished(superset)]
        return load()

    outcome = swapper(cluster, store, clock).run([(swap, superset_while_uploading)], {TP: 5})
    assert outcome.done == [] and "no longer served" in outcome.undone[0][1]
    assert served(cluster) == [superset.segment_id]


def test_a_killed_journal_write_leaves_nothing_after_the_next_run(tmp_path: Path) -> None:
    """A kill inside an entry's atomic write leaves its temporary file; the next run (holding the
    lock) removes it, and reads no entry from it."""
    cluster, store, clock = tier(tmp_path)
    journal = Journal(store.storage, store.root)
    swap = planned(OLD_A, clock)
    journal.write(swap)
    half = Path(journal.directory) / "t-0-x-y.json.0123456789abcdef0123456789abcdef.tmp"
    half.write_bytes(swap.to_json()[:10])
    journal.remove(swap)
    swapper(cluster, store, clock).resume(SwapOutcome())
    assert not half.exists() and list(Path(journal.directory).iterdir()) == []
