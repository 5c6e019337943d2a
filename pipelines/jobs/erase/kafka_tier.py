"""`erase LOG_DIR --kafka-tier SETTINGS --bootstrap-server HOST:PORT --in-place`: the listed keys'
records taken out of Kafka's remote tier while the cluster serves it (docs/erasing-keys.md).

The broker's log directory and its remote tier are read as one log (the remote log metadata from
the live cluster), and every segment is matched as `erase` matches it. Each remote segment that
holds a listed key is rewritten as `erase` rewrites one, into a staging area beside the tier's
objects, then swapped for the old one through the remote log metadata topic
(pipelines.kafka_tier.swap). Local segments (the broker's, not yet uploaded) are never touched
online: their listed records are named with their offsets. A partition where a safety check
fails is left as it was and named (exit 3).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pipelines.jobs.erase.carried import EvidenceStore, SegmentEvidence, carry, settle_evidence
from pipelines.jobs.erase.evidence import EraseReport, key_evidence, say_totals
from pipelines.jobs.erase.job import WORKER_MODULES, Erased, erase_all, fill_report, segment_tasks
from pipelines.jobs.erase.kafka_local import not_yet_tiered
from pipelines.jobs.erase.proof import PairTask, prove_pairs
from pipelines.jobs.erase.request import EraseRequest
from pipelines.jobs.erase.segment import EraseTask, SegmentErasure
from pipelines.kafka_tier.cluster import LiveCluster
from pipelines.kafka_tier.rewrite import (
    require_live_cluster,
    retention_refusals,
    staged_loader,
    staged_path,
    swap_doc,
)
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
from pipelines.keys.key_digest import EPHEMERAL_NOTE, KeyDigest
from pipelines.keys.key_list import KeyList, checked_key_list
from pipelines.keys.key_set import ErasedKeys
from pipelines.log.scanned import Log, scan_stage
from pipelines.output.harness import job_run
from pipelines.output.report import write_json_report
from pipelines.output.run_lock import held
from pipelines.runtime.faults import fault_point
from pipelines.runtime.spark_handle import Spark
from pipelines.runtime.stop import publishing, raise_if_stopped
from segment_io.clock import SYSTEM_CLOCK, Clock
from segment_io.errors import KafkaTierSettings
from segment_io.kafka_tier.objects import SegmentObjects
from segment_io.kafka_tier.url import ROOT
from segment_io.kafka_tier.view import KafkaTierView, open_kafka_tier
from segment_io.layout import list_log_dir
from segment_io.segment.reader import SegmentReader
from segment_io.storage import Location
from segment_io.text import counted
from segment_io.topic_partition import TopicPartition


@dataclass(frozen=True)
class Planned:
    """A remote segment holding listed keys, its erase into the staging, and its successor."""

    tp: TopicPartition
    objects: SegmentObjects
    result: SegmentErasure
    swap: Swap


def erase_kafka_tier(
    spark: Spark,
    request: EraseRequest,
    log: Log = print,
    clock: Clock | None = None,
    grace_ms: int = GRACE_MS,
    cluster: Cluster | None = None,
) -> EraseReport:
    """Erase `request`'s keys, in place, from the Kafka remote tier its `src` names (a
    `kafka-tier:` URL with the cluster's bootstrap servers)."""
    # The remote segments alone are read as a log: the broker's local ones, which it is writing,
    # are only searched for listed keys (kafka_local.not_yet_tiered).
    served = request.src.storage
    if not isinstance(served, KafkaTierView):
        raise KafkaTierSettings(f"{request.src.url}: not a broker's log directory read with its Kafka tier")
    view = served.remote_only_view()
    request = replace(request, src=Location.at(view, ROOT))
    bootstrap = require_live_cluster(view.bootstrap, "erase", "erased")
    store = segment_store(view.settings, *view.objects, view.keyring)
    live = LiveCluster(bootstrap) if cluster is None else None
    try:
        talk = live if live is not None else cluster
        assert talk is not None
        if request.dry_run:
            return _erase(spark, request, log, clock or SYSTEM_CLOCK, grace_ms, talk, view, store)
        # One run at a time swaps in a tier: another's journalled swaps are resumed only once it died.
        with held(store.storage, lock_path(store), "the tier's segment swaps", uuid.uuid4().hex):
            return _erase(spark, request, log, clock or SYSTEM_CLOCK, grace_ms, talk, view, store)
    finally:
        if live is not None:
            live.close()


def _erase(
    spark: Spark,
    request: EraseRequest,
    log: Log,
    clock: Clock,
    grace_ms: int,
    cluster: Cluster,
    view: KafkaTierView,
    store: SegmentStore,
) -> EraseReport:
    swapper = Swapper(cluster, store, clock, grace_ms, fault_point, log, publishing)
    resumed = SwapOutcome()
    evidence = EvidenceStore(store.storage, store.root)
    carried: list[SegmentEvidence] = []
    if not request.dry_run:
        swapper.resume(resumed)  # an earlier run's swaps finished or undone, before the metadata is read
        if resumed.resumed:
            swaps = counted(len(resumed.resumed), "segment swap")
            log(f"segpipe: finished or undid {swaps} of an earlier run")
            view, _ = open_kafka_tier(request.src.url)  # the metadata read again, as the swaps left it
        if evidence.all():  # what the earlier runs' swaps removed, for this report
            journalled = {s.old.segment_id for s in swapper.journal.entries()}
            listed = {
                seg.segment_id for state in cluster.replay().partitions.values() for seg in state.served()
            }
            carried = settle_evidence(evidence, journalled, listed)
    keys = request.checked or checked_key_list(request.keys, request.key_format, log)
    header_names = ErasedKeys.of([n.encode() for n in request.header_names]) if request.header_names else None
    digest = request.digest or KeyDigest.ephemeral()
    if not digest.given:
        log(EPHEMERAL_NOTE)
    staging = Location.at(store.storage, staging_dir(store))
    if not request.dry_run:
        store.storage.remove(staging.path)  # an earlier run's leftovers, named by no metadata
    report = EraseReport(
        request.src.url,
        request.src.url,
        "dry-run" if request.dry_run else uuid.uuid4().hex[:12],
        0,
        request.dry_run,
        request.header_names,
        secret=digest.fingerprint if digest.given else None,
    )
    with job_run(spark, WORKER_MODULES) as run:
        scanned = scan_stage(run, Location.at(view, ROOT), log, request.on_corrupt, request.topics)
        names = [str(p.tp) for p in scanned.listing.partitions]
        remote = {s.log_url: (tp, s) for tp, segs in view.remote.items() for s in segs}
        tiered = segment_tasks(scanned)
        out = None if request.dry_run else staging
        with run.timer.stage("erase"):
            rewritten = erase_all(run, scanned, tiered, keys, header_names, out, digest, copy_unchanged=False)
            local = not_yet_tiered(view, request.topics, keys, header_names, log)
        raise_if_stopped()
        planned = _plan(rewritten, remote, out, clock)
        sizes = {
            tp: sum(s.seg.size for s in segs) + local.bytes.get(tp, 0) for tp, segs in view.remote.items()
        }
        left = retention_refusals([(p.tp, p.swap.old.size) for p in planned], sizes, cluster)
        for p in planned:  # an erasure the plugin could not serve is refused, not left half done
            why = unservable(store, p.swap.new)
            if why is not None:
                left.setdefault(p.tp, f"segment {p.swap.old.segment_id}: {why}")
        for tp, why in sorted(left.items()):
            log(f"segpipe: left as it was: {tp}: {why}")
        go = [p for p in planned if p.tp not in left]
        doc: dict[str, Any] = {
            "left_as_they_were": [{"partition": str(tp), "reason": why} for tp, why in sorted(left.items())],
            "resumed": [swap_doc(s) for s in resumed.resumed],
        }
        if out is not None:
            with run.timer.stage("prove"):
                unproved = _prove(run.spark, go, tiered, Location.at(view, ROOT), out, keys, header_names)
            for p, why in unproved:
                log(f"segpipe: erasure proof failed, left as it was: segment {p.swap.old.segment_id}: {why}")
            doc["proof_failed"] = [{**swap_doc(p.swap), "reason": why} for p, why in unproved]
            doc["proved"] = len(go) - len(unproved)
            go = [p for p in go if all(p is not q for q, _ in unproved)]
        if request.dry_run:
            doc["would_swap"] = [{**swap_doc(p.swap), "by": None} for p in go]
        else:
            with run.timer.stage("swap"):
                evidence.keep(
                    SegmentEvidence.of(
                        report.run_id,
                        report.secret,
                        names[p.result.partition],
                        p.swap.old.segment_id,
                        p.result,
                        rewritten.digests,
                    )
                    for p in go
                )
                epochs = {p.swap.old.tp: cluster.leader_epoch(p.swap.old.tp) for p in go}
                done = swapper.run(
                    [(p.swap, staged_loader(staging, p.tp, p.result.base_offset, p.objects)) for p in go],
                    epochs,
                )
            store.storage.remove(staging.path)
            for swap, why in done.undone:
                log(f"segpipe: left as it was: {swap.old.tp.topic}-{swap.old.tp.partition}: {why}")
            kept = {s.old.segment_id for s, _ in done.kept}
            swapped = {s.old.segment_id: s for s in done.done if s.old.segment_id not in kept}
            go = [
                replace(p, swap=swapped[p.swap.old.segment_id])
                for p in go
                if p.swap.old.segment_id in swapped
            ]
            doc["swapped"] = [swap_doc(p.swap) for p in go]
            doc["undone"] = [{**swap_doc(s), "reason": why} for s, why in done.undone]
            doc["kept"] = [{**swap_doc(s), "reason": why} for s, why in [*resumed.kept, *done.kept]]
            doc["seconds_per_swap"] = round(done.seconds_per_swap, 3)
            doc["grace_waited_s"] = round(done.grace_waited_s, 3)
        doc["not_yet_tiered"] = [n.doc() for n in local.named]
        # The evidence counts what left the tier; a key is "found nowhere" only if no remote
        # segment, swapped or not, holds it, nor a local one.
        gone = {p.result.source for p in go}
        results = [r if r.source in gone else _untouched(r) for r in rewritten.results]
        fill_report(report, names, replace(rewritten, results=results), run.timer.total, run.timer.seconds)
        # The tier's partitions are those with remote segments (the broker's internal topics, never
        # tiered, are listed by its log directory but hold nothing of it).
        report.partitions = [p for p in report.partitions if p.segments]
        if rewritten.joined is None:  # a joined list's keys found nowhere are the join's count
            _, report.not_found = key_evidence(names, rewritten.digests, rewritten.results)
            report.not_found = [d for d in report.not_found if d not in local.digests(rewritten.digests)]
            report.not_found_count = len(report.not_found)
    report.kafka_tier = doc
    carry(report, carried, log)
    report.remaining_copies = [
        f"{t['partition']}: local segment {t['base_offset']} "
        f"(offsets {t['first_offset']}-{t['last_offset']}): "
        "not yet uploaded; erased by a run after the leader tiers it (once it rolls and is uploaded)"
        for t in doc["not_yet_tiered"]
    ]
    for line in report.remaining_copies:
        log(f"segpipe: not erased online: {line}")
    if request.report_path is not None:
        write_json_report(request.report_path, report.to_dict())
    if not request.dry_run:  # reported: the evidence of every swap this run resolved goes
        kept = {s["replaced"] for s in doc.get("kept", [])}
        evidence.resolved(i for i in evidence.all() if i not in kept)
    say_totals(report, request.keys, request.key_format, log)
    return report


def _plan(
    rewritten: Erased,
    remote: Mapping[str, tuple[TopicPartition, SegmentObjects]],
    out: Location | None,
    clock: Clock,
) -> list[Planned]:
    """Per remote segment with a listed key, its successor's metadata: its size and largest
    timestamp are the staged log's (a dry run: the old segment's)."""
    planned = []
    for r in rewritten.results:
        if not r.erased:
            continue
        tp, objects = remote[r.source]
        largest = objects.seg.max_timestamp_ms
        if out is not None:
            staged = staged_path(out, tp, r.base_offset, "log")
            table = SegmentReader(out.storage, staged, r.base_offset).scan().table
            largest = int(table.max_timestamp.max()) if len(table) else -1
        new = successor(objects.seg, new_segment_id(), r.bytes_out, largest, clock.now_ms())
        planned.append(Planned(tp, objects, r, Swap(objects.seg, new)))
    return planned


def _prove(
    spark: Spark,
    planned: list[Planned],
    tiered: list[EraseTask],
    src: Location,
    staging: Location,
    keys: ErasedKeys | KeyList,
    header_names: ErasedKeys | None,
) -> list[tuple[Planned, str]]:
    """Each rewritten segment proved against its old one before anything is served, from the
    data alone (as validate --erased proves an erase): no listed key left, every other record the
    same, batch for batch; and the listed records the proof finds in the old segment are the ones
    the erase removed. The staged log proved here is what the upload must read back as."""
    if not planned:
        return []
    staged = {
        (str(part.tp), s.base_offset): s
        for part in list_log_dir(staging.storage, staging.path, allow_incomplete=True).partitions
        for s in part.segments
    }
    old = {t.files.log.path: t.files for t in tiered}
    tasks = [
        PairTask(
            p.result.source, src, staging, old[p.result.source], staged[(str(p.tp), p.result.base_offset)]
        )
        for p in planned
    ]
    verdicts = {v.partition: v for v in prove_pairs(spark, tasks, keys, header_names, near=False)}
    failed = []
    for p in planned:
        v = verdicts[p.result.source]
        if v.problem or v.listed_left:
            failed.append((p, v.problem or f"{v.listed_left} records of listed keys left"))
        elif v.erased != p.result.erased:
            failed.append(
                (
                    p,
                    f"the old segment holds {v.erased} records of listed keys, the erase removed "
                    f"{p.result.erased}",
                )
            )
    return failed


def _untouched(r: SegmentErasure) -> SegmentErasure:
    """A segment's result as if nothing had matched: its swap did not happen."""
    empty = np.zeros(0, np.int64)
    return replace(
        r,
        rewritten=False,
        erased=0,
        bytes_out=r.bytes_in,
        batches_rewritten=0,
        batches_emptied=0,
        batches_dropped=0,
        entries=empty,
        counts=empty,
        first_offset=empty,
        last_offset=empty,
    )
