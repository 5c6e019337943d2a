"""`clean LOG_DIR --kafka-tier SETTINGS --bootstrap-server HOST:PORT --in-place`: a topic's remote
segments compacted by Kafka's cleaner rules while the cluster serves it
(docs/kafka-tier-compaction.md).

Kafka tiers only topics with `cleanup.policy=delete`; the operator gives segpipe the compaction
configs the topic is to have (`--topic-set TOPIC:cleanup.policy=compact`, ...). The remote
segments alone are read as a log (the remote log metadata from the live cluster), every one of
them inactive, and cleaned as `clean` cleans a log: each key's latest remote record wins,
tombstones and markers get their delete horizon and go on a pass at or after it, aborted data
goes, offsets stay, and nothing at or above the first uncleanable offset changes. The broker's
local segments are never read: a key whose latest record is still local keeps its remote records
(more is kept; nothing the broker's cleaner would keep goes). Retention stays the broker's. Each
remote segment is a group of its own, so it has one compacted counterpart with its offsets; each
counterpart that differs from its segment is proved with the whole output against the source
(validate --against's promise) and then swapped for it through the metadata topic
(pipelines.kafka_tier.swap). A partition where a check fails is left as it was and named (exit 3).
"""

from __future__ import annotations

import posixpath
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pipelines.config import JobConfig
from pipelines.config.selection import TopicSelection
from pipelines.config.terms import Gate
from pipelines.errors import ConfigError
from pipelines.jobs.clean.job import run_clean
from pipelines.jobs.clean.request import CleanRequest, require_new_reports
from pipelines.kafka_tier.cluster import LiveCluster
from pipelines.kafka_tier.rewrite import require_live_cluster, retention_refusals, staged_loader, swap_doc
from pipelines.kafka_tier.stores import lock_path, segment_store, staging_dir
from pipelines.kafka_tier.swap import (
    GRACE_MS,
    Cluster,
    SegmentStore,
    SwapOutcome,
    Swapper,
    new_segment_id,
    successor,
    unservable,
)
from pipelines.kafka_tier.swap_journal import Swap
from pipelines.log.scanned import Log
from pipelines.output.harness import preflight
from pipelines.output.report import RunReport, write_json_report
from pipelines.output.run_lock import held
from pipelines.output.staging import require_writable
from pipelines.runtime.faults import fault_point
from pipelines.runtime.spark_handle import Spark
from pipelines.runtime.stop import publishing, raise_if_stopped, withdraw
from segment_io.clock import SYSTEM_CLOCK, Clock
from segment_io.errors import KafkaTierSettings
from segment_io.kafka_tier.objects import SegmentObjects
from segment_io.kafka_tier.url import ROOT
from segment_io.kafka_tier.view import KafkaTierView, open_kafka_tier
from segment_io.layout import list_log_dir
from segment_io.segment.reader import SegmentReader
from segment_io.segment.scan import BatchTable, scan_buffer
from segment_io.storage import Location
from segment_io.text import counted
from segment_io.topic_partition import TopicPartition

# Why the run's configs differ from the operator's (recorded as the values' source).
ALONE = "each remote segment is replaced by one successor with its offsets"
SEALED = "the remote segments alone are compacted: none is active"
RETENTION = "a tiered topic's retention is the broker's"
# Where a run stages its compacted log: beside the tier's objects (every worker reaches it), in the
# swaps' staging, which one run at a time holds (the tier's lock).
STAGED_LOG = "compacted"

# The gate the command line builds for the run: the compacted log (staged) proved against the
# remote log it was made from, under the run's terms (validate --against's promise).
GateFor = Callable[[Location, Location], Gate]


@dataclass(frozen=True)
class Compacted:
    """A remote segment whose compacted counterpart differs from it, and its successor."""

    tp: TopicPartition
    objects: SegmentObjects
    swap: Swap
    records_before: int
    records_after: int

    def doc(self) -> dict[str, Any]:
        return {
            **swap_doc(self.swap),
            "records_before": self.records_before,
            "records_after": self.records_after,
        }


def clean_kafka_tier(
    spark: Spark,
    request: CleanRequest,
    gate_for: GateFor,
    log: Log = print,
    clock: Clock | None = None,
    grace_ms: int = GRACE_MS,
    cluster: Cluster | None = None,
) -> RunReport:
    """Compact, in place, the remote segments of the Kafka tier `request.src` names (a broker's log
    directory read with its tier and the cluster's bootstrap servers): each changed one swapped
    for its proved successor while the cluster serves it. `gate_for(staged, source)`: the gate the
    compacted log passes before any swap (`promise_gate_for`: validate --against the remote log)."""
    served = request.src.storage
    if not isinstance(served, KafkaTierView):
        raise KafkaTierSettings(f"{request.src.url}: not a broker's log directory read with its Kafka tier")
    bootstrap = require_live_cluster(served.bootstrap, "clean", "cleaned")
    if request.dst is not None or request.link or request.select != "all":
        raise ConfigError(
            "a compaction in Kafka's tiered storage writes into the tier: no DST, --link, --select"
        )
    require_new_reports(request.report_path)
    store = segment_store(served.settings, *served.objects, served.keyring)
    live = LiveCluster(bootstrap) if cluster is None else None
    try:
        talk = live if live is not None else cluster
        assert talk is not None
        swapper = Swapper(talk, store, clock or SYSTEM_CLOCK, grace_ms, fault_point, log, publishing)
        # One run at a time stages and swaps in a tier (a dry run too: it stages).
        with held(store.storage, lock_path(store), "the tier's segment swaps", uuid.uuid4().hex):
            return _clean(spark, request, gate_for, log, served, store, swapper)
    finally:
        if live is not None:
            live.close()


def _clean(
    spark: Spark,
    request: CleanRequest,
    gate_for: GateFor,
    log: Log,
    view: KafkaTierView,
    store: SegmentStore,
    swapper: Swapper,
) -> RunReport:
    resumed = SwapOutcome()
    if not request.dry_run:
        swapper.resume(resumed)  # an earlier run's swaps finished or undone, before the metadata is read
        if resumed.resumed:
            log(
                f"segpipe: finished or undid {counted(len(resumed.resumed), 'segment swap')} of an "
                "earlier run"
            )
            view, _ = open_kafka_tier(request.src.url)  # the metadata read again, as the swaps left it
    # The log as the leader's size-based retention counts it: its remote and local segments.
    sizes = {p.tp: p.size for p in list_log_dir(view, ROOT).partitions}
    remote = view.remote_only_view()
    src = Location.at(remote, ROOT)
    topics = compacted_topics(remote, request)
    staging = Location.at(store.storage, posixpath.join(staging_dir(store), STAGED_LOG))
    store.storage.remove(staging_dir(store))  # an earlier run's leftovers, named by no metadata
    config = remote_compaction(request.config)
    compaction = replace(
        request,
        src=src,
        dst=staging,
        config=config,
        topics=TopicSelection(tuple(topics)),
        dry_run=False,  # a dry run stages its counterparts too (and serves none): its figures are theirs
        report_path=None,
    )
    # The staging lies inside the tier by design; it must be free of another run's output.
    checked = preflight(compaction, lambda: require_writable(staging))
    try:
        report = run_clean(spark, checked, log, gate_for(staging, src))
    finally:
        withdraw(staging.url)  # the staging is not the output: the swaps serve what it holds
    try:
        raise_if_stopped()
        fault_point("kafka-tier-compacted")
        doc = _swap(request, report, remote, store, swapper, staging, sizes, log)
    finally:
        store.storage.remove(staging_dir(store))
    doc["resumed"] = [swap_doc(s) for s in resumed.resumed]
    report.src, report.dst, report.dry_run = request.src.url, request.src.url, request.dry_run
    report.kafka_tier = doc
    if request.report_path is not None:
        write_json_report(request.report_path, report.to_dict())
    return report


def remote_compaction(config: JobConfig) -> JobConfig:
    """The configs a remote log is compacted under: the operator's compaction configs alone (its
    retention is the broker's), every segment inactive, each a group of its own."""
    return config.only("compact", RETENTION).all_sealed(SEALED).each_segment_alone(ALONE)


def compacted_topics(view: KafkaTierView, request: CleanRequest) -> list[str]:
    """The tiered topics the run compacts: those with remote segments that its selection keeps and
    its configs say are compacted; none is refused, naming the tiered topics."""
    tiered = sorted({tp.topic for tp in view.remote})
    kept = [t for t in tiered if (request.topics is None or request.topics(t))]
    chosen = [t for t in kept if request.config.for_topic(t).compact]
    if not chosen:
        names = ", ".join(tiered) or "none"
        raise ConfigError(
            f"no tiered topic to compact (tiered topics: {names}): Kafka tiers only cleanup.policy=delete "
            "topics, so give the compaction configs a topic is to have: "
            "--topic-set TOPIC:cleanup.policy=compact"
        )
    return chosen


def _swap(
    request: CleanRequest,
    report: RunReport,
    view: KafkaTierView,
    store: SegmentStore,
    swapper: Swapper,
    staging: Location,
    sizes: dict[TopicPartition, int],
    log: Log,
) -> dict[str, Any]:
    """Each remote segment against its compacted counterpart: those that differ planned, checked
    against size-based retention (`sizes`: each partition's log, local and remote, as the leader
    counts it) and (not in a dry run) swapped."""
    clock = swapper.clock
    remote_bytes = sum(o.seg.size for segs in view.remote.values() for o in segs)
    staged = {
        (str(p.tp), s.base_offset): s.log
        for p in list_log_dir(staging.storage, staging.path, allow_incomplete=True).partitions
        for s in p.segments
    }
    planned: list[Compacted] = []
    left: dict[TopicPartition, str] = {}
    whole: list[dict[str, str]] = []
    unchanged = 0
    compacted = {m.partition for m in report.partitions}
    for tp, segments in sorted(view.remote.items()):
        if str(tp) not in compacted:
            continue
        stray = {b for name, b in staged if name == str(tp)} - {o.seg.start_offset for o in segments}
        if stray:  # the output's segments are not the remote ones: no successor keeps its offsets
            left[tp] = (
                f"the compacted log has segments at {sorted(stray)[:3]}, where no remote segment begins"
            )
            continue
        for objects in segments:
            seg = objects.seg
            where = f"segment {seg.segment_id} (offsets {seg.start_offset}-{seg.end_offset})"
            if seg.size == 0:  # an earlier run's successor that holds no batch: nothing to remove
                unchanged += 1
                continue
            if (str(tp), seg.start_offset) not in staged:
                left[tp] = f"{where} has no compacted counterpart"
                break
            # Header tables only: both logs are mapped where they are local files, never held.
            log_file = staged[(str(tp), seg.start_offset)]
            table = SegmentReader(staging.storage, log_file.path, seg.start_offset).scan().table
            before = scan_buffer(objects.log_url, seg.start_offset, objects.read_log_array()).table
            if same_batches(before, table):
                unchanged += 1
                continue
            outside = _outside(table, seg.start_offset, seg.end_offset)
            if outside is not None:  # read from the data, not from the file's name
                left[tp] = f"{where}: its compacted counterpart holds offset {outside}"
                break
            # A successor may hold no batch (every record of it superseded): its offsets stay the
            # old segment's, and a fetch there moves on to the next segment, as for any batch gone.
            largest = int(table.max_timestamp.max()) if len(table) else -1
            swap = Swap(seg, successor(seg, new_segment_id(), log_file.size, largest, clock.now_ms()))
            why = unservable(store, swap.new)
            if why is not None:  # kept whole: the compacted log keeps more, and is still right
                whole.append({"partition": str(tp), "segment": seg.segment_id, "reason": why})
                log(f"segpipe: kept whole: {tp}: {where}: {why}")
                continue
            planned.append(Compacted(tp, objects, swap, _count(before), _count(table)))
    left.update(retention_refusals([(c.tp, c.swap.old.size) for c in planned], sizes, swapper.cluster))
    for tp, why in sorted(left.items()):
        log(f"segpipe: left as it was: {tp}: {why}")
    go = [c for c in planned if c.tp not in left]
    doc: dict[str, Any] = {
        "left_as_they_were": [{"partition": str(tp), "reason": why} for tp, why in sorted(left.items())],
        "unchanged_segments": unchanged,
        "kept_whole": whole,
        "remote_bytes_before": remote_bytes,
        "remote_bytes_after": remote_bytes - sum(c.swap.old.size - c.swap.new.size for c in go),
    }
    if request.dry_run:
        doc["would_swap"] = [{**c.doc(), "by": None} for c in go]
        log(f"segpipe: dry run: would swap {counted(len(go), 'remote segment')}; nothing served changed")
        return doc
    loaders = [(c.swap, staged_loader(staging, c.tp, c.swap.old.start_offset, c.objects)) for c in go]
    epochs = {c.swap.old.tp: swapper.cluster.leader_epoch(c.swap.old.tp) for c in go}
    done = swapper.run(loaders, epochs)
    for swap, why in done.undone:
        log(f"segpipe: left as it was: {swap.old.tp.topic}-{swap.old.tp.partition}: {why}")
    kept = {s.old.segment_id for s, _ in done.kept}
    by_old = {c.swap.old.segment_id: c for c in go}
    swapped = [replace(by_old[s.old.segment_id], swap=s) for s in done.done if s.old.segment_id not in kept]
    doc["swapped"] = [c.doc() for c in swapped]
    doc["undone"] = [{**swap_doc(s), "reason": why} for s, why in done.undone]
    doc["kept"] = [{**swap_doc(s), "reason": why} for s, why in done.kept]
    doc["seconds_per_swap"] = round(done.seconds_per_swap, 3)
    doc["grace_waited_s"] = round(done.grace_waited_s, 3)
    removed = sum(c.records_before - c.records_after for c in swapped)
    log(
        f"segpipe: swapped {counted(len(swapped), 'remote segment')} for compacted ones "
        f"({removed:,} records removed); {counted(unchanged, 'segment')} had nothing to remove"
    )
    return doc


def same_batches(old: BatchTable, new: BatchTable) -> bool:
    """Whether a compacted counterpart holds the very batches of its segment, only encoded anew
    (a compressed batch compressed again): the same offsets, records, attributes (its delete
    horizon's flag) and base timestamps (the horizon itself). Nothing would be removed, and no
    horizon given: the segment is left alone."""
    columns = ("base_offset", "last_offset", "records_count", "attributes", "base_timestamp")
    return len(old) == len(new) and all(np.array_equal(getattr(old, c), getattr(new, c)) for c in columns)


def _outside(table: BatchTable, start: int, end: int) -> int | None:
    """An offset a counterpart's batches hold outside its segment's [start, end], if any."""
    if not len(table):
        return None
    known = table.base_offset >= 0  # a legacy wrapper's base offset is known only inside it
    low = int(table.base_offset[known].min()) if known.any() else start
    high = int(table.last_offset.max())
    return low if low < start else high if high > end else None


def _count(table: BatchTable) -> int:
    """The records of a header table's batches (a legacy batch's wrapper counts one)."""
    return int(np.where(table.records_count < 0, 1, table.records_count).sum()) if len(table) else 0
