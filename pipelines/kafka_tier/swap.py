"""A remote segment swapped for a rewritten one (the same offsets, fewer records) while the
cluster serves it, told to the brokers the way their own uploads and expiries are: records of the
remote log metadata topic, in the broker's order (docs/erasing-keys.md).

What the broker's metadata cache does with them (Kafka 4.x, RemoteLogMetadataCache and
RemoteLogLeaderEpochState): the successor's COPY_SEGMENT_STARTED only lists it as unreferenced;
its COPY_SEGMENT_FINISHED maps each of its epochs' start offsets to it, replacing the old id, so
every fetch from then on reads the successor; the old segment's DELETE_SEGMENT_STARTED removes an
epoch's entry only where it still names the old id. The leader's expiration task deletes at once
any listed segment in DELETE_SEGMENT_STARTED (its retry of a failed delete), so the grace period a
fetch in flight needs comes *before* that record: between the successor's COPY_SEGMENT_FINISHED
and the old segment's DELETE_SEGMENT_STARTED.

Each swap is written to a journal in the tier's storage before its first record, and leaves it
after its last; a run killed at any step leaves every offset readable, and the next run reads the
metadata again and, per journalled swap, finishes it (successor served) or undoes it (not yet).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Protocol

from pipelines.kafka_tier.swap_journal import Journal, Swap
from segment_io.clock import Clock, SystemClock
from segment_io.errors import KafkaTierCorrupt
from segment_io.kafka_tier.metadata import (
    MetadataRecord,
    SegmentMetadata,
    SegmentState,
    SegmentUpdate,
    TopicIdPartition,
)
from segment_io.kafka_tier.metadata_cache import MetadataReplay, PartitionState
from segment_io.kafka_tier.objects import SuccessorFiles
from segment_io.storage.base import Checksum, Storage

GRACE_MS = 60_000  # after the successor is served, before the old objects go: a fetch in flight ends
# Successors uploaded and read back at once: each holds a few chunks, never its segment, so memory
# is this many times a few chunks whatever the segment size; the uploads wait on the store.
UPLOADS_AT_ONCE = max(2, min(8, os.cpu_count() or 2))


class Cluster(Protocol):
    """What a swap needs of the live cluster."""

    def publish(self, record: MetadataRecord) -> None:
        """Send one record to the remote log metadata topic and wait for its acknowledgement
        (KafkaTierPublishFailed where none comes)."""

    def replay(self) -> MetadataReplay:
        """The remote log metadata as it stands now, replayed."""

    def leader_epoch(self, tp: TopicIdPartition) -> int | None:
        """The partition's current leader epoch (None: the cluster does not say)."""

    def topic_config(self, topic: str, name: str) -> str | None:
        """The topic's effective value of config `name` (None: the cluster does not say)."""


EMPTY_UNSERVED = "its successor would hold no batch, which the tier's plugin cannot serve (a fetch fails)"


class SegmentStore(Protocol):
    """A storage plugin's layout, written: a segment's objects uploaded, read back, deleted."""

    storage: Storage
    root: str
    # Whether the plugin's reader serves a segment of no bytes: a successor from which every
    # record went. Where it does not, a fetch there fails, so no such successor is made.
    serves_empty_segments: bool

    def upload(self, seg: SegmentMetadata, files: SuccessorFiles) -> bytes | None:
        """Write the segment's files, the log streamed as it comes; the plugin's custom metadata
        for its COPY_SEGMENT_FINISHED record."""

    def read_back(self, seg: SegmentMetadata) -> Checksum:
        """Size and CRC-32C of the segment's log as the plugin's reader returns it (checked
        against its objects), read in bounded chunks."""

    def delete(self, seg: SegmentMetadata) -> None:
        """Remove every object of the segment (those already gone are no error)."""


def new_segment_id(random: Callable[[int], bytes] = os.urandom) -> str:
    """A random segment id as Kafka's Uuid.randomUuid makes one: never zero, never the metadata
    topic's id (1), and never a string that starts with "-"."""
    while True:
        raw = random(16)
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if int.from_bytes(raw, "big") > 1 and not text.startswith("-"):
            return text


def unservable(store: SegmentStore, new: SegmentMetadata) -> str | None:
    """Why the tier's plugin could not serve the successor `new`, if it could not."""
    return EMPTY_UNSERVED if new.size == 0 and not store.serves_empty_segments else None


def successor(
    old: SegmentMetadata, segment_id: str, size: int, max_timestamp_ms: int, now_ms: int
) -> SegmentMetadata:
    """The rewritten segment's metadata: the old one's partition, offsets, leader epochs and
    broker, with its own id, size and largest timestamp, as COPY_SEGMENT_STARTED."""
    return replace(
        old,
        segment_id=segment_id,
        size=size,
        max_timestamp_ms=max_timestamp_ms,
        event_timestamp_ms=now_ms,
        custom_metadata=None,
        state=SegmentState.COPY_SEGMENT_STARTED,
    )


def update(seg: SegmentMetadata, state: SegmentState, now_ms: int, custom: bytes | None) -> SegmentUpdate:
    return SegmentUpdate(seg.tp, seg.segment_id, seg.broker_id, now_ms, custom, state)


def mapped(replay: MetadataReplay, seg: SegmentMetadata) -> bool:
    """Whether the broker's cache serves `seg`: each of its leader epochs maps its start offset
    there to it (a superset a new leader uploaded, or another swap, would have taken its place)."""
    state = replay.partitions.get(seg.tp, PartitionState())
    return all(
        (at := state.epochs.get(epoch)) is not None and at.offset_to_id.get(start) == seg.segment_id
        for epoch, start in seg.leader_epochs
    )


def state_of(replay: MetadataReplay, seg: SegmentMetadata) -> SegmentState | None:
    """The segment's state in the replayed metadata (None: never seen, or DELETE_SEGMENT_FINISHED)."""
    found = replay.partitions.get(seg.tp, PartitionState()).segments.get(seg.segment_id)
    return None if found is None else found.state


class _Tally:
    """Chunks passed through once, their size and CRC-32C counted on the way."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self.chunks, self.checksum = chunks, Checksum(0, 0)

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.chunks:
            self.checksum = self.checksum.extend(chunk)
            yield chunk


@dataclass
class SwapOutcome:
    """What a run of swaps did: the swaps done, those undone with the reason, the journalled swaps
    of an earlier run it finished or undid."""

    done: list[Swap] = field(default_factory=list)
    undone: list[tuple[Swap, str]] = field(default_factory=list)
    resumed: list[Swap] = field(default_factory=list)
    finished: list[Swap] = field(default_factory=list)  # of those resumed, the ones whose successor is served
    # Successors not served when their old segment was to go: the old one kept, the swap left in
    # the journal for the next run (which finishes it once the successor is served, or undoes it).
    kept: list[tuple[Swap, str]] = field(default_factory=list)
    seconds_per_swap: float = 0.0  # the run's time over its swaps, the grace period's wait left out
    grace_waited_s: float = 0.0


@dataclass
class Swapper:
    """Runs swaps against `cluster`, writing through `store`, waiting on `clock`; `fault(name)` is
    called at each step a kill test names (a no-op in production)."""

    cluster: Cluster
    store: SegmentStore
    clock: Clock = field(default_factory=SystemClock)
    grace_ms: int = GRACE_MS
    fault: Callable[[str], None] = lambda name: None
    say: Callable[[str], None] = lambda line: None
    # Held around each step that makes a swap visible (a successor served, an old segment gone):
    # a stop signal waits for the step, and the step is named as done (runtime.stop.publishing).
    publishing: Callable[[str], AbstractContextManager[None]] = lambda what: nullcontext()
    uploads_at_once: int = UPLOADS_AT_ONCE

    @property
    def journal(self) -> Journal:
        return Journal(self.store.storage, self.store.root)

    def _publish(self, record: MetadataRecord) -> None:
        self.cluster.publish(record)

    # --- an earlier run's swaps ---------------------------------------------------------------

    def resume(self, outcome: SwapOutcome) -> None:
        """Finish (successor served) or undo (not yet) every journalled swap, from the metadata as
        it stands now; one whose old segment must stay (see _not_served) is kept, still journalled."""
        self.journal.clear_temporaries()  # a killed run's half-written entries (this run holds the lock)
        swaps = list(self.journal.entries())
        if not swaps:
            return
        replay = self.cluster.replay()
        retire = []
        for swap in swaps:
            new = state_of(replay, swap.new)
            if new is SegmentState.COPY_SEGMENT_FINISHED:
                retire.append(swap)  # the old segment goes (or finishes going) as in a run
                continue
            self._undo(swap, new)
            self.journal.remove(swap)
            outcome.resumed.append(swap)
        self._retire(retire, replay, outcome)
        kept = {swap.new.segment_id for swap, _ in outcome.kept}
        outcome.finished += [swap for swap in retire if swap.new.segment_id not in kept]
        outcome.resumed += outcome.finished

    # --- this run's swaps -----------------------------------------------------------------------

    def run(
        self,
        swaps: list[tuple[Swap, Callable[[], SuccessorFiles]]],
        epochs: Mapping[TopicIdPartition, int | None],
    ) -> SwapOutcome:
        """Swap each old segment for its successor (the files from its loader): uploaded and
        read back (`uploads_at_once` at a time), announced, served, then the old one retired after
        the grace period. A swap whose old segment is no longer served as it was planned, or whose
        partition's leader epoch moved (`epochs`: as planned), is undone and named."""
        outcome = SwapOutcome()
        started = self.clock.now_ms()
        for swap, _ in swaps:  # each journalled, then announced, before any successor's upload
            self.journal.write(swap)
            self._publish(swap.new)
            self.fault("kafka-tier-copy-started")
        uploaded: list[Swap] = []
        pool = ThreadPoolExecutor(max_workers=self.uploads_at_once, thread_name_prefix="segpipe-upload")
        try:
            for pending in [pool.submit(self._upload, swap, load) for swap, load in swaps]:
                uploaded.append(pending.result())  # a failed upload stops the run: its swaps journalled
                self.fault("kafka-tier-uploaded")
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        replay = self.cluster.replay()
        served: list[Swap] = []
        for swap in uploaded:
            problem = self._unsafe(swap, replay, epochs)
            if problem is not None:
                self._undo(swap, state_of(replay, swap.new))
                self.journal.remove(swap)
                outcome.undone.append((swap, problem))
                continue
            tp = swap.old.tp
            with self.publishing(f"{tp.topic}-{tp.partition}: segment {swap.new.segment_id} served"):
                now = self.clock.now_ms()
                self._publish(
                    update(swap.new, SegmentState.COPY_SEGMENT_FINISHED, now, swap.new.custom_metadata)
                )
            served.append(swap)
            self.fault("kafka-tier-copy-finished")
        outcome.grace_waited_s = self._retire(served, self.cluster.replay(), outcome) / 1000
        outcome.done = served
        if swaps:
            busy = (self.clock.now_ms() - started) / 1000 - outcome.grace_waited_s
            outcome.seconds_per_swap = busy / len(swaps)
        return outcome

    def _upload(self, swap: Swap, load: Callable[[], SuccessorFiles]) -> Swap:
        """One successor's objects written, then read back through the plugin's reader: the log it
        returns must be the one sent (size and CRC-32C of the bytes that went, never the store's
        word for them) and of the size its metadata gives."""
        files = load()
        sent = _Tally(files.log)
        custom = self.store.upload(swap.new, replace(files, log=sent))
        new = replace(swap.new, custom_metadata=custom)
        held = self.store.read_back(new)
        if held != sent.checksum or held.size != new.size:
            raise KafkaTierCorrupt(
                self.store.storage.url(self.store.root),
                None,
                f"segment {new.segment_id}: its uploaded log does not read back as written "
                f"({held.size} bytes with CRC-32C {held.crc32c:08x} read back, {sent.checksum.size} "
                f"bytes with CRC-32C {sent.checksum.crc32c:08x} sent, {new.size} in its metadata)",
            )
        return Swap(swap.old, new)

    def _unsafe(
        self, swap: Swap, replay: MetadataReplay, epochs: Mapping[TopicIdPartition, int | None]
    ) -> str | None:
        """Why the successor must not be served now, if it must not."""
        tp = swap.old.tp
        if state_of(replay, swap.old) is not SegmentState.COPY_SEGMENT_FINISHED or not mapped(
            replay, swap.old
        ):
            return (
                f"segment {swap.old.segment_id} is no longer served as it was "
                "(the leader expired or replaced it meanwhile)"
            )
        if state_of(replay, swap.new) is not SegmentState.COPY_SEGMENT_STARTED:
            return f"segment {swap.new.segment_id}'s COPY_SEGMENT_STARTED is not in the metadata"
        now = self.cluster.leader_epoch(tp)
        if now != epochs.get(tp):
            return f"the leader epoch of {tp.topic}-{tp.partition} moved from {epochs.get(tp)} to {now}"
        return None

    def _retire(self, swaps: list[Swap], replay: MetadataReplay, outcome: SwapOutcome) -> int:
        """After the grace period from the latest successor's COPY_SEGMENT_FINISHED, each old
        segment goes (DELETE_SEGMENT_STARTED, its objects removed, DELETE_SEGMENT_FINISHED) once
        the metadata, read again, shows its successor served, and the successor's objects read
        back whole: an old segment is never removed on the run's own word. The milliseconds waited."""
        if not swaps:
            return 0
        finished = []
        for swap in swaps:
            seg = replay.partitions[swap.new.tp].segments.get(swap.new.segment_id)
            finished.append(
                seg.updated_ms if seg is not None and seg.updated_ms >= 0 else self.clock.now_ms()
            )
        wait = max(max(finished) + self.grace_ms - self.clock.now_ms(), 0)
        if wait:
            self.say(
                f"segpipe: waiting {wait / 1000:.1f} s (the grace period) before the replaced segments go"
            )
            self.clock.sleep_ms(wait)
        replay = self.cluster.replay()
        for swap in swaps:
            problem = self._not_served(swap, replay)
            if problem is not None:
                outcome.kept.append((swap, problem))
                self.say(f"segpipe: kept segment {swap.old.segment_id}: {problem}")
                continue
            old = replay.partitions[swap.old.tp].segments.get(swap.old.segment_id)
            tp = swap.old.tp
            with self.publishing(f"{tp.topic}-{tp.partition}: segment {swap.old.segment_id} removed"):
                if old is not None and old.state is SegmentState.COPY_SEGMENT_FINISHED:
                    now = self.clock.now_ms()
                    self._publish(update(old, SegmentState.DELETE_SEGMENT_STARTED, now, old.custom_metadata))
                    self.fault("kafka-tier-delete-started")
                if old is not None:  # None: the leader's expiration finished it meanwhile
                    self._finish_delete(old)
                self.journal.remove(swap)
        return wait

    def _not_served(self, swap: Swap, replay: MetadataReplay) -> str | None:
        """Why the old segment must stay: its successor is not what the broker serves at those
        offsets, or its objects do not read back whole."""
        new = replay.partitions.get(swap.new.tp, PartitionState()).segments.get(swap.new.segment_id)
        if new is None or new.state is not SegmentState.COPY_SEGMENT_FINISHED or not mapped(replay, new):
            return f"its successor {swap.new.segment_id} is not served at its offsets"
        try:
            size = self.store.read_back(new).size
        except (KafkaTierCorrupt, FileNotFoundError) as exc:
            return f"its successor {swap.new.segment_id} does not read back: {exc}"
        if size != new.size:  # the bytes decoded, not a manifest's word for them
            return (
                f"its successor {swap.new.segment_id} reads back {size} bytes, its metadata says {new.size}"
            )
        return None

    def _finish_delete(self, seg: SegmentMetadata) -> None:
        self.store.delete(seg)
        self._publish(
            update(seg, SegmentState.DELETE_SEGMENT_FINISHED, self.clock.now_ms(), seg.custom_metadata)
        )

    def _undo(self, swap: Swap, state: SegmentState | None) -> None:
        """The successor withdrawn: never served, its objects removed (and its records closed)."""
        if state is SegmentState.COPY_SEGMENT_STARTED:
            self._publish(update(swap.new, SegmentState.DELETE_SEGMENT_STARTED, self.clock.now_ms(), None))
            state = SegmentState.DELETE_SEGMENT_STARTED
        self.store.delete(swap.new)
        if state is SegmentState.DELETE_SEGMENT_STARTED:
            self._publish(update(swap.new, SegmentState.DELETE_SEGMENT_FINISHED, self.clock.now_ms(), None))
