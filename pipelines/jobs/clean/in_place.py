"""`clean REMOTE_URL --in-place`: compaction and retention inside a remote tier.

The tier is cleaned like any log (its segments are all inactive: a remote tier has no active
segment) into a staging prefix inside the tier; the output's segments are uploaded as new objects
of the tier (new segment ids, each read back and checked) and committed, per partition, as a new
manifest version, only if the version the run started from is still the newest (else a typed
conflict and that partition is left as it was). Until its commit, readers keep reading the old
objects; afterwards the old objects are unreferenced and `tier --expire` removes them once the
grace period has passed. The staging prefix is removed at the end, or by the next run.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pipelines.clock import clock_ms
from pipelines.config import JobConfig
from pipelines.jobs.clean.job import run_clean
from pipelines.jobs.clean.request import CleanRequest
from pipelines.log.scanned import scan_log
from pipelines.output.remote_upload import partition_files, upload_all, upload_tasks
from pipelines.output.report import RunReport
from pipelines.runtime.faults import fault_point
from pipelines.runtime.session import publishing, raise_if_stopped
from segment_io.layout import CLEANER_CHECKPOINT, INCOMPLETE, META_DIR
from segment_io.remote.manifest import ORIGIN_CLEAN, PartitionManifest
from segment_io.remote.tier import RemoteTier
from segment_io.remote.view import tiered_url
from segment_io.storage import Storage
from segment_io.text import counted
from segment_io.topic_partition import TopicPartition

STAGING = posixpath.join(META_DIR, "in-place")
SEALED_BECAUSE = "a remote tier holds no active segment"


def clean_in_place(
    spark: Any,
    remote_url: str,
    config: JobConfig | None = None,
    now_ms: int | None = None,
    dry_run: bool = False,
    report_path: str | None = None,
    log: Callable[[str], Any] = print,
    on_corrupt: str = "fail",
) -> RunReport:
    """Clean the remote tier at `remote_url` in place; returns `clean`'s report."""
    tier = RemoteTier.open(remote_url)
    before = {tp: tier.read(tp) for tp in tier.partitions()}
    staging_path = posixpath.join(tier.root, STAGING)
    staging_url = tier.storage.url(staging_path)
    if not dry_run:  # a dry run writes and removes nothing
        _remove_finished_staging(tier.storage, staging_path, log)
    sealed = (config or JobConfig()).all_sealed(SEALED_BECAUSE)
    source = tiered_url(remote_url, None)
    request = CleanRequest(
        src=source, dst=staging_url, config=sealed, now_ms=now_ms, dry_run=dry_run, report_path=report_path,
        on_corrupt=on_corrupt,
    )  # fmt: skip
    report = run_clean(spark, request, log)
    if dry_run:
        return report
    try:
        fault_point("in-place-cleaned")
        raise_if_stopped()
        committed = _commit_output(spark, tier, staging_url, before, report, log)
        log(f"segpipe: committed the cleaned log of {counted(committed, 'partition')} to {tier.url}")
    finally:
        tier.storage.remove(staging_path)
    return report


def _remove_finished_staging(storage: Storage, staging_path: str, log: Callable[[str], Any]) -> None:
    """A staging prefix whose clean was published but whose commit never came (a stopped run) is
    garbage whichever way that run ended; an unfinished one is `clean`'s to judge (dead: removed,
    alive: refused)."""
    if storage.exists(posixpath.join(staging_path, META_DIR, "manifest.json")) and not storage.exists(
        posixpath.join(staging_path, META_DIR, INCOMPLETE)
    ):
        where = storage.url(staging_path)
        log(f"segpipe: removed the staging of an in-place clean that did not commit: {where}")
        storage.remove(staging_path)


def _commit_output(
    spark: Any,
    tier: RemoteTier,
    staging_url: str,
    before: dict[TopicPartition, PartitionManifest],
    report: RunReport,
    log: Callable[[str], Any],
) -> int:
    scanned = scan_log(spark, staging_url, log, skip_corrupt=False)
    starts = {m.partition: m.log_start_offset for m in report.partitions}
    cleaned = scanned.listing.checkpoints.get(CLEANER_CHECKPOINT, {})
    tasks = []
    parts = list(scanned.listing.partitions)
    for key, part in enumerate(parts):
        # Each segment ends where the next begins, the last where the remote log ended before; an
        # empty segment (what retention leaves of an emptied log) holds nothing to tier.
        segments = [s for s in scanned.segments[part.tp] if s.meta.size > 0]
        ends = [s.meta.base_offset - 1 for s in segments[1:]] + [before[part.tp].next_offset - 1]
        chosen = [(s.meta.segment_id, end) for s, end in zip(segments, ends, strict=True)]
        tasks += upload_tasks(scanned, key, part, chosen)
    uploaded = upload_all(spark, tasks, tier.url, None)
    fault_point("in-place-uploaded")
    raise_if_stopped()
    with publishing():
        for key, part in enumerate(parts):
            old = before[part.tp]
            epochs, metadata = partition_files(scanned.storage, part)
            tier.commit(
                old.successor(
                    clock_ms(),  # the wall clock: expiry counts its grace period from it
                    segments=tuple(replace(s, origin=ORIGIN_CLEAN) for s in uploaded.get(key, [])),
                    log_start_offset=max(old.log_start_offset, starts.get(str(part.tp), 0)),
                    leader_epochs=epochs if epochs is not None else old.leader_epochs,
                    partition_metadata=metadata if metadata is not None else old.partition_metadata,
                    cleaner_offset=cleaned.get(part.tp, old.cleaner_offset),
                    note="clean",
                )
            )
    return len(parts)
