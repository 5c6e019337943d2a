"""A remote segment swapped for a compacted successor where Aiven's plugin keeps its objects in an
object store (GCS, Azure): the swap protocol (tests/unit/test_kafka_tier_swap.py) run against the
fixture's objects copied there, the broker's metadata replayed from its log directory (a broker
with such a tier cannot run here; the records a swap sends land in the replay). Once through, and
killed at each step, the next run finishing or undoing it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipelines.kafka_tier.stores import AivenStore, segment_store
from pipelines.kafka_tier.swap import SwapOutcome, Swapper, mapped, new_segment_id, successor
from pipelines.kafka_tier.swap_journal import Journal, Swap
from segment_io.kafka_tier.aiven import AivenSegment
from segment_io.kafka_tier.metadata import SegmentMetadata, SegmentState
from segment_io.kafka_tier.metadata_log import read_metadata_log
from segment_io.kafka_tier.objects import SuccessorFiles
from segment_io.kafka_tier.url import kafka_tier_url
from segment_io.kafka_tier.view import KafkaTierView
from segment_io.storage import LocalStorage, open_storage
from segment_io.storage.base import Checksum
from tests.unit.test_kafka_tier_swap import GRACE, Clock, Cluster
from tests.unit.test_kafka_tier_write import compacted

# The steps of a swap a run can be killed at (pipelines/runtime/faults.py names them).
SWAP_STEPS = (
    "kafka-tier-copy-started",
    "kafka-tier-uploaded",
    "kafka-tier-copy-finished",
    "kafka-tier-delete-started",
)


@dataclass
class Planned:
    """One planned swap in the store: the old segment, its successor's log and files, the cluster."""

    store: AivenStore
    view: KafkaTierView
    old: AivenSegment
    old_log: bytes
    log: bytes
    files: dict[str, bytes]
    cluster: Cluster
    clock: Clock
    swap: Swap

    def load(self) -> SuccessorFiles:
        """As a run's loader: the log in pieces, the rest whole."""
        pieces = iter([self.log[i : i + 5000] for i in range(0, len(self.log), 5000)])
        return SuccessorFiles(pieces, self.files)

    def swapper(self, fault: Callable[[str], None] = lambda name: None) -> Swapper:
        return Swapper(self.cluster, self.store, self.clock, GRACE, fault)

    def reads(self, seg: SegmentMetadata) -> bytes:
        return AivenSegment(
            self.store.storage, self.store.root, seg, self.view.settings.key_prefix, self.view.keyring
        ).read_log()


def planned(settings: Path, logdir: Path) -> Planned:
    """The first remote segment of the tier `settings` names, to be swapped for one that keeps
    every other batch (the snapshot and leader epochs kept, as a run's loader keeps them)."""
    view, _ = open_storage(kafka_tier_url(str(settings), str(logdir)))
    assert isinstance(view, KafkaTierView)
    store = segment_store(view.settings, *view.objects, view.keyring)
    assert isinstance(store, AivenStore)
    old = next(s for segs in view.remote.values() for s in segs)
    assert isinstance(old, AivenSegment)
    old_log = old.read_log()
    log, indexes = compacted(old_log, old.seg.start_offset, slice(0, None, 2))
    kept = {k: data for k in ("snapshot", "leader-epoch") if (data := old.index(k)) is not None}
    files = {k: v for k, v in indexes.items() if k != "log"} | kept
    clock = Clock()
    cluster = Cluster(list(read_metadata_log(LocalStorage(), str(logdir))))
    new = successor(old.seg, new_segment_id(), len(log), old.seg.max_timestamp_ms, clock.now_ms())
    return Planned(store, view, old, old_log, log, files, cluster, clock, Swap(old.seg, new))


def swapped_in_the_store(settings: Path, logdir: Path) -> None:
    """The swap run through: its log streamed to the store in pieces, read back through the
    plugin's layout, served in the broker's order after the grace period, the old objects gone."""
    p = planned(settings, logdir)
    outcome = p.swapper().run([(p.swap, p.load)], {p.old.seg.tp: p.cluster.epoch})
    new_id, old_id = p.swap.new.segment_id, p.old.seg.segment_id
    assert [s.new.segment_id for s in outcome.done] == [new_id] and outcome.kept == []
    S = SegmentState
    assert [(r.segment_id, r.state) for r in p.cluster.sent] == [  # type: ignore[union-attr]
        (new_id, S.COPY_SEGMENT_STARTED),
        (new_id, S.COPY_SEGMENT_FINISHED),
        (old_id, S.DELETE_SEGMENT_STARTED),
        (old_id, S.DELETE_SEGMENT_FINISHED),
    ]
    assert p.clock.slept == [GRACE]
    done = outcome.done[0].new
    back = AivenSegment(p.store.storage, p.store.root, done, p.view.settings.key_prefix, p.view.keyring)
    assert back.read_log() == p.log and p.store.read_back(done) == Checksum.of(p.log)
    assert back.index("index") == p.files["index"] and back.read_log(100, 200) == p.log[100:200]
    assert back.index("leader-epoch") == p.files["leader-epoch"]
    assert not any(p.store.storage.exists(path) for path in p.old.paths.values())
    assert list(Journal(p.store.storage, p.store.root).entries()) == []


class Killed(BaseException):
    """The run's process gone at a step (nothing after it runs)."""


def killed_swap_is_finished_or_undone(settings: Path, logdir: Path, step: str) -> None:
    """The swap killed at `step`: its offsets are served throughout by the old segment or its
    successor, whichever the metadata maps, and that one reads back whole; the next run finishes
    it (the successor was served: the old segment goes) or undoes it (it was not: the successor's
    objects go), and leaves no journal entry."""

    def kill(name: str) -> None:
        if name == step:
            raise Killed

    p = planned(settings, logdir)
    with pytest.raises(Killed):
        p.swapper(kill).run([(p.swap, p.load)], {p.old.seg.tp: p.cluster.epoch})

    def serving() -> SegmentMetadata:
        replay = p.cluster.replay()
        ours = [s for s in (p.old.seg, p.swap.new) if mapped(replay, s)]
        assert len(ours) == 1, "the offsets are served by exactly one of the two"
        return ours[0]

    before = serving()
    assert p.reads(before) == (p.log if before is p.swap.new else p.old_log)
    p.swapper().resume(outcome := SwapOutcome())
    assert [s.old.segment_id for s in outcome.resumed] == [p.old.seg.segment_id] and outcome.kept == []
    after = serving()
    assert after.segment_id == before.segment_id  # a successor served stays; one not yet, never is
    assert p.reads(after) == (p.log if after is p.swap.new else p.old_log)
    gone = (
        p.old
        if after is p.swap.new
        else AivenSegment(p.store.storage, p.store.root, p.swap.new, "", p.view.keyring)
    )
    assert not any(p.store.storage.exists(path) for path in gone.paths.values())
    assert list(Journal(p.store.storage, p.store.root).entries()) == []
