"""`erase`: the records of listed keys removed from every selected partition of a log directory,
written to a new one (docs/erasing-keys.md). Stages: scan (headers, CRCs) → erase (one task per
pack of segments: match, then copy or rewrite) → copy (partition and root files) → publish. SRC is
only read (and a running broker's log directory refused); DST appears complete or not at all."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pipelines.jobs.erase.evidence import EraseReport, key_evidence, partition_totals, say_totals
from pipelines.jobs.erase.join import JoinedKeys, run_joined
from pipelines.jobs.erase.plan import retain_empty
from pipelines.jobs.erase.request import EraseRequest
from pipelines.jobs.erase.segment import EraseContext, EraseTask, SegmentErasure, erase_segment
from pipelines.keys.key_digest import EPHEMERAL_NOTE, KeyDigest
from pipelines.keys.key_list import KeyList, checked_key_list
from pipelines.keys.key_set import ErasedKeys
from pipelines.log.cleanable import log_end_offset
from pipelines.log.producers import listed_log_start, write_snapshots
from pipelines.log.scanned import SCAN_TASKS_PER_CORE, Log, Scanned, scan_stage, skipped_docs
from pipelines.output.checkpoints import write_checkpoint_files
from pipelines.output.copy import CopyTask, run_copies
from pipelines.output.harness import Checked, JobRun, checked, job_run, publish, staged_output
from pipelines.output.report import write_json_report
from pipelines.output.staging import ERASE_JOB, MANIFEST_JOB, NOT_FOUND_DIR, NOT_FOUND_SUFFIX, REPORT, Staging
from pipelines.runtime.spark_handle import Spark
from pipelines.runtime.stop import raise_if_stopped
from pipelines.runtime.tasks import DRIVER_COMPACT_BYTES, run_packed
from segment_io.broker_lock import broker_stopped
from segment_io.storage import Location, Place, transfer

WORKER_MODULES = ("pipelines.log.scan", "pipelines.jobs.erase.segment", "pipelines.output.copy")


def erase(spark: Spark, src: Place, dst: Place, keys: str, log: Log = print, **options: Any) -> EraseReport:
    """Erase the keys listed in the file `keys` from SRC into DST (options: EraseRequest)."""
    request = EraseRequest(src=Location.of(src), dst=Location.of(dst), keys=keys, **options)
    return run_erase(spark, request, log)


# erase --validate: called with the staged output and the keys (read, or the list to join);
# raising publishes nothing.
Gate = Callable[[Location, ErasedKeys | KeyList], None]


def run_erase(
    spark: Spark, request: EraseRequest | Checked[EraseRequest], log: Log = print, gate: Gate | None = None
) -> EraseReport:
    """The erase `request` asks for. `gate(staged_url, keys)` runs on the complete staged output
    before publication; an error it raises publishes nothing (erase --validate)."""
    request = checked(request)
    keys = request.checked
    if keys is None:
        keys = checked_key_list(request.keys, request.key_format, log)
    header_names = ErasedKeys.of([n.encode() for n in request.header_names]) if request.header_names else None
    # An archive has no writer: every segment is erased from, the active one too. A log directory
    # a broker holds is refused (its active segment is being written) and kept from one meanwhile.
    src = request.src
    with broker_stopped(src.storage, src.path, "erase"), job_run(spark, WORKER_MODULES) as run:
        return _erase(run, request, keys, header_names, log, gate)


def _erase(
    run: JobRun,
    request: EraseRequest,
    keys: ErasedKeys | KeyList,
    header_names: ErasedKeys | None,
    log: Log,
    gate: Gate | None,
) -> EraseReport:
    timer = run.timer
    scanned = scan_stage(run, request.src, log, request.on_corrupt, request.topics)
    skipped = skipped_docs(scanned)
    names = [str(p.tp) for p in scanned.listing.partitions]
    tasks = segment_tasks(scanned)
    digest = request.digest or KeyDigest.ephemeral()
    if not digest.given:
        log(EPHEMERAL_NOTE)
    report = EraseReport(
        request.src.url,
        request.out.url,
        "dry-run",
        0,
        request.dry_run,
        request.header_names,
        skipped=skipped,
        secret=digest.fingerprint if digest.given else None,
    )
    report.remaining_copies = [request.src.url]
    if request.dry_run:
        with timer.stage("erase"):
            erased = erase_all(run, scanned, tasks, keys, header_names, None, digest)
        fill_report(report, names, erased, timer.total, timer.seconds)
        _write_report(report, request)
        say_totals(report, request.keys, request.key_format, log)
        return report
    with staged_output(run, request.out, log) as staging:
        report.run_id = staging.run_id
        with timer.stage("erase"):
            erased = erase_all(run, scanned, tasks, keys, header_names, staging.location, digest)
        raise_if_stopped()
        with timer.stage("copy"):
            _copy_side_files(scanned, staging, log)
        fill_report(report, names, erased, timer.total, timer.seconds)
        staging.write_meta(REPORT, report.to_dict())
        if gate is not None:
            with timer.stage("validate"):
                gate(staging.location, keys)
        publish(
            staging,
            {
                "run_id": staging.run_id,
                "src": request.src.url,
                MANIFEST_JOB: ERASE_JOB,
                "keys_file": request.keys,
                "keys_listed": report.keys_listed,
                "header_names": list(request.header_names),
                "partitions": names,
                "skipped": skipped,
            },
            {p.partition: p.records_out for p in report.partitions},
        )
    _write_report(report, request)
    say_totals(report, request.keys, request.key_format, log)
    return report


def segment_tasks(scanned: Scanned) -> list[EraseTask]:
    """One task per segment of every partition, with its batches' empty-header rule."""
    tasks = []
    for index, part in enumerate(scanned.listing.partitions):
        segments = scanned.segments[part.tp]
        masks = retain_empty([s.table for s in segments])
        for files, mask in zip(part.segments, masks, strict=True):
            tasks.append(EraseTask(index, part.tp.dir_name, scanned.src, files, mask))
    return tasks


@dataclass(frozen=True)
class Erased:
    """What the erase tasks did, and what is known of the listed keys: how many there are, the
    digest of each by entry (or, for a joined list, of each found, by key id), and for a joined
    list what the join learnt of those found nowhere."""

    results: list[SegmentErasure]
    listed: int
    digests: Sequence[str] | Mapping[int, str]
    joined: JoinedKeys | None


def erase_all(
    run: JobRun,
    scanned: Scanned,
    tasks: list[EraseTask],
    keys: ErasedKeys | KeyList,
    header_names: ErasedKeys | None,
    staging: Location | None,
    digest: KeyDigest,
    copy_unchanged: bool = True,
) -> Erased:
    """Every segment's erase: each task matching its records against the keys itself (a list read
    whole), or handed its listed records by the key join (a list too large for that). The tasks
    run in the driver's threads where a small local log allows it (as clean's small compactions:
    every record is decoded), else in a local master's processes or as Spark tasks."""
    if isinstance(keys, ErasedKeys):
        ctx = EraseContext(keys, header_names, staging, copy_unchanged)
        results = run_packed(
            run.spark,
            tasks,
            [t.files.size for t in tasks],
            SCAN_TASKS_PER_CORE,
            lambda pack: [erase_segment(t, ctx) for t in pack],
            scanned.storage.near,
            DRIVER_COMPACT_BYTES,
        )
        return Erased(results, len(keys), keys.digests(digest), None)
    ctx = EraseContext(None, header_names, staging, copy_unchanged)
    # The digests of keys found nowhere stay in files of the output, a file per bucket (a dry run
    # counts them only).
    not_found_dir = None if staging is None else staging.child(NOT_FOUND_DIR)
    results, joined = run_joined(
        run.spark,
        keys,
        header_names,
        tasks,
        lambda t: [(t.src, t.files)],
        [t.files.size for t in tasks],
        SCAN_TASKS_PER_CORE,
        lambda t, listed: erase_segment(replace(t, listed=listed[0]), ctx),
        not_found_dir,
        digest,
    )
    return Erased(results, joined.listed, joined.found, joined)


def _copy_side_files(scanned: Scanned, staging: Staging, log: Log) -> None:
    """Producer snapshots and partition files as they are (offsets are never renumbered, and the
    batches that carry producer state are kept), those a broker writes where the source has none
    (producers.write_snapshots), and the root checkpoints of the partitions."""
    copies = [
        CopyTask(
            scanned.src, info.path, posixpath.join(part.tp.dir_name, info.name), info.mtime_ms, info.size
        )
        for part in scanned.listing.partitions
        for info in (*part.snapshots, *part.other_files)
    ]
    for part in scanned.listing.partitions:  # a partition without segments still has its directory
        staging.storage.makedirs(posixpath.join(staging.path, part.tp.dir_name))
    run_copies(copies, staging.location)
    for part in scanned.listing.partitions:  # an archive gets the snapshots a broker would have written
        segments = scanned.segments[part.tp]
        log_start = listed_log_start(scanned.listing, part)
        write_snapshots(
            scanned.storage,
            part,
            segments,
            [True] * len(segments),
            log_start,
            [f.base_offset for f in part.segments],
            log_end_offset(segments),
            staging.storage,
            posixpath.join(staging.path, part.tp.dir_name),
            log,
        )
    write_checkpoint_files(
        staging, scanned.listing.checkpoints, set(scanned.listing.checkpoints), scanned.src
    )


def fill_report(
    report: EraseReport,
    names: list[str],
    erased: Erased,
    seconds_total: float,
    seconds_by_stage: dict[str, float],
) -> None:
    report.keys_listed = erased.listed
    report.partitions = partition_totals(names, erased.results)
    report.erased, report.not_found = key_evidence(names, erased.digests, erased.results)
    report.not_found_count = len(report.not_found)
    if erased.joined is not None:
        report.not_found_count = erased.joined.not_found
        report.not_found_files = [
            posixpath.join(NOT_FOUND_DIR, name) for name in erased.joined.not_found_files
        ]
    report.seconds_total, report.seconds_by_stage = seconds_total, seconds_by_stage


def _write_report(report: EraseReport, request: EraseRequest) -> None:
    """The report at --report; a joined list's files of digests found nowhere are copied from the
    output beside it (REPORT_PATH.not-found/), and the report names the copies."""
    at = request.report_path
    if at is None:
        return
    doc = report.to_dict()
    if report.not_found_files:
        out, beside = request.out, Location(at.url + NOT_FOUND_SUFFIX)
        copies = []
        for name in report.not_found_files:
            copy = beside.file(posixpath.basename(name))
            transfer(out.storage, out.file(name), beside.storage, copy)
            copies.append(beside.storage.url(copy))
        doc["not_found_files"] = copies
    write_json_report(at, doc)
