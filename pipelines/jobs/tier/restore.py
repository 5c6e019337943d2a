"""`restore`: a remote tier (and, optionally, its local log directory) written out as one plain
Kafka log directory, published like `clean`'s output: complete or not at all."""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from functools import partial
from typing import Any

from pipelines.jobs.tier.request import RestoreRequest
from pipelines.output.copy import CopyTask, run_copies, segment_copies
from pipelines.output.harness import Checked, checked, job_run, publish, staged_output
from pipelines.runtime.spark_handle import Spark
from pipelines.runtime.stop import raise_if_stopped
from pipelines.runtime.tasks import on_workers, spark_packs
from segment_io.layout import BROKER_STATE_FILES, LogDirListing, list_log_dir
from segment_io.storage import Location, Place
from segment_io.text import counted

WORKER_MODULES = ("pipelines.output.copy",)
COPY_TASKS_PER_CORE = 2


def restore(
    spark: Spark, remote_url: Place, dst: Place, local: Place | None = None, log: Callable[[str], Any] = print
) -> int:
    """Write every segment of the remote tier (then the local ones above it) with their indexes,
    snapshots, leader-epoch checkpoints and log-start offsets to DST; returns the bytes written."""
    request = RestoreRequest(
        remote=Location.of(remote_url), dst=Location.of(dst), local=Location.of_optional(local)
    )
    return run_restore(spark, request, log)


def run_restore(
    spark: Spark, request: RestoreRequest | Checked[RestoreRequest], log: Callable[[str], Any] = print
) -> int:
    """The restore `request` asks for (see `restore`)."""
    request = checked(request)
    dst, local = request.dst, request.local
    listing = list_log_dir(request.view.storage, request.view.path)
    tasks = _copy_tasks(listing, request.view)
    with job_run(spark, WORKER_MODULES) as run, staged_output(run, dst, log) as staging:
        if tasks:
            chosen = spark_packs(run.spark, tasks, [t.size for t in tasks], COPY_TASKS_PER_CORE)
            on_workers(run.spark, chosen, partial(run_copies, staging=staging.location))
        raise_if_stopped()
        publish(
            staging,
            {
                "run_id": staging.run_id,
                "restored_from": request.remote.url,
                "local": None if local is None else local.url,
                "partitions": [str(p.tp) for p in listing.partitions],
            },
        )
    written = sum(t.size for t in tasks)
    log(
        f"segpipe: restored {counted(len(listing.partitions), 'partition')} "
        f"({written / 2**20:,.1f} MB) to {dst}"
    )
    return written


def _copy_tasks(listing: LogDirListing, view: Location) -> list[CopyTask]:
    """Every file of the two tiers as one log: segments with their indexes, the partitions' other
    files, the root files (not the broker's own state: its lock, clean-shutdown mark, bootstrap)."""
    tasks: list[CopyTask] = []
    for part in listing.partitions:
        name = part.tp.dir_name
        for files in part.segments:
            tasks.extend(segment_copies(name, files, view))
        for info in (*part.snapshots, *part.other_files):
            tasks.append(CopyTask(view, info.path, posixpath.join(name, info.name), info.mtime_ms, info.size))
    for info in view.storage.list(view.path):  # the broker's own state is not the log's
        if not info.is_dir and info.name not in BROKER_STATE_FILES:
            tasks.append(CopyTask(view, info.path, info.name, info.mtime_ms, info.size))
    return tasks
