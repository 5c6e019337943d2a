"""`restore`: a remote tier (and, optionally, its local log directory) written out as one plain
Kafka log directory, published like `clean`'s output: complete or not at all."""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from typing import Any

from pipelines.output.copy import CopyTask, run_copies, segment_copies
from pipelines.output.destination import require_destination
from pipelines.output.staging import Staging
from pipelines.runtime.faults import fault_point
from pipelines.runtime.session import LazySpark, preload_in_workers, publishing, raise_if_stopped, settle
from pipelines.runtime.tasks import on_workers, spark_packs
from segment_io.layout import list_log_dir
from segment_io.remote.tier import RemoteTier
from segment_io.remote.view import tiered_url
from segment_io.storage import open_storage
from segment_io.text import counted

WORKER_MODULES = ("pipelines.output.copy",)
COPY_TASKS_PER_CORE = 2


def restore(
    spark: Any, remote_url: str, dst: str, local: str | None = None, log: Callable[[str], Any] = print
) -> int:
    """Write every segment of the remote tier (then the local ones above it) with their indexes,
    snapshots, leader-epoch checkpoints and log-start offsets to DST; returns the bytes written."""
    RemoteTier.open(remote_url)  # refuses a prefix that is not a remote tier
    require_destination(remote_url, dst)
    if local is not None:
        require_destination(local, dst)
    view_url = tiered_url(remote_url, local)
    view, root = open_storage(view_url)
    listing = list_log_dir(view, root)
    tasks: list[CopyTask] = []
    for part in listing.partitions:
        name = part.tp.dir_name
        for files in part.segments:
            tasks.extend(segment_copies(name, files, view_url))
        for info in (*part.snapshots, *part.other_files):
            tasks.append(
                CopyTask(view_url, info.path, posixpath.join(name, info.name), info.mtime_ms, info.size)
            )
    for info in view.list(root):
        if not info.is_dir:
            tasks.append(CopyTask(view_url, info.path, info.name, info.mtime_ms, info.size))
    spark = LazySpark.of(spark)
    preload_in_workers(spark.session(), WORKER_MODULES)
    staging = Staging.create(dst, log)
    try:
        if tasks:
            staging_url = staging.url
            chosen = spark_packs(spark, tasks, [t.size for t in tasks], COPY_TASKS_PER_CORE)
            on_workers(spark, chosen, lambda pack: _copied(pack, staging_url))
        raise_if_stopped()
        fault_point("before-publish")
        with publishing():
            staging.publish({"run_id": staging.run_id, "restored_from": remote_url, "local": local,
                             "partitions": [str(p.tp) for p in listing.partitions]})  # fmt: skip
    except BaseException:
        settle(spark)  # no task of this run writes into its staging after this
        staging.abort()
        raise
    written = sum(t.size for t in tasks)
    log(
        f"segpipe: restored {counted(len(listing.partitions), 'partition')} "
        f"({written / 2**20:,.1f} MB) to {dst}"
    )
    return written


def _copied(pack: list[CopyTask], staging_url: str) -> list[None]:
    """A pack of copies, as a task whose results are none."""
    run_copies(pack, staging_url)
    return []
