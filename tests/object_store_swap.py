"""A remote segment swapped for a compacted successor where Aiven's plugin keeps its objects in an
object store (GCS, Azure): the swap protocol (tests/unit/test_kafka_tier_swap.py) run against the
fixture's objects copied there, the broker's metadata replayed from its log directory (a broker
with such a tier cannot run here; the records a swap sends land in the replay)."""

from __future__ import annotations

from pathlib import Path

from pipelines.kafka_tier.stores import AivenStore, segment_store
from pipelines.kafka_tier.swap import Swapper, new_segment_id, successor
from pipelines.kafka_tier.swap_journal import Journal, Swap
from segment_io.kafka_tier.aiven import AivenSegment
from segment_io.kafka_tier.metadata import SegmentState
from segment_io.kafka_tier.metadata_log import read_metadata_log
from segment_io.kafka_tier.objects import SuccessorFiles
from segment_io.kafka_tier.url import kafka_tier_url
from segment_io.kafka_tier.view import KafkaTierView
from segment_io.storage import LocalStorage, open_storage
from segment_io.storage.base import Checksum
from tests.unit.test_kafka_tier_swap import GRACE, Clock, Cluster
from tests.unit.test_kafka_tier_write import compacted


def swapped_in_the_store(settings: Path, logdir: Path) -> None:
    """The first remote segment of the tier `settings` names, swapped for one that keeps every
    other batch: its log streamed to the store in pieces, read back through the plugin's layout,
    served in the broker's order after the grace period, the old segment's objects gone."""
    view, _ = open_storage(kafka_tier_url(str(settings), str(logdir)))
    assert isinstance(view, KafkaTierView)
    store = segment_store(view.settings, *view.objects, view.keyring)
    assert isinstance(store, AivenStore)
    old = next(s for segs in view.remote.values() for s in segs)
    assert isinstance(old, AivenSegment)
    log, files = compacted(old.read_log(), old.seg.start_offset, slice(0, None, 2))
    clock = Clock()
    cluster = Cluster(list(read_metadata_log(LocalStorage(), str(logdir))))
    swap = Swap(
        old.seg, successor(old.seg, new_segment_id(), len(log), old.seg.max_timestamp_ms, clock.now_ms())
    )
    pieces = [log[i : i + 5000] for i in range(0, len(log), 5000)]
    kept = {k: data for k in ("snapshot", "leader-epoch") if (data := old.index(k)) is not None}
    others = {k: v for k, v in files.items() if k != "log"} | kept  # what a run's loader gives
    outcome = Swapper(cluster, store, clock, GRACE).run(
        [(swap, lambda: SuccessorFiles(iter(pieces), others))], {old.seg.tp: cluster.epoch}
    )
    assert [s.new.segment_id for s in outcome.done] == [swap.new.segment_id] and outcome.kept == []
    sent = [(r.segment_id, r.state) for r in cluster.sent]  # type: ignore[union-attr]
    S = SegmentState
    new_id, old_id = swap.new.segment_id, old.seg.segment_id
    assert sent == [
        (new_id, S.COPY_SEGMENT_STARTED),
        (new_id, S.COPY_SEGMENT_FINISHED),
        (old_id, S.DELETE_SEGMENT_STARTED),
        (old_id, S.DELETE_SEGMENT_FINISHED),
    ]
    assert clock.slept == [GRACE]
    done = outcome.done[0].new
    back = AivenSegment(store.storage, store.root, done, view.settings.key_prefix, view.keyring)
    assert back.read_log() == log and store.read_back(done) == Checksum.of(log)
    assert back.index("index") == files["index"] and back.read_log(100, 200) == log[100:200]
    assert back.index("leader-epoch") == kept["leader-epoch"]  # read before the old segment went
    assert not any(store.storage.exists(p) for p in old.paths.values())
    assert list(Journal(store.storage, store.root).entries()) == []
