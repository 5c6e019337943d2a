"""`clean REMOTE_URL --in-place`: compaction and retention inside a remote tier.

The tier is cleaned like any log (its segments are all inactive: a remote tier has no active
segment) into a staging prefix inside the tier, and committed as new objects of the tier
(output.remote_commit). The staging prefix is removed at the end, or by the next run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pipelines.errors import ConfigError
from pipelines.jobs.clean.job import run_clean
from pipelines.jobs.clean.request import CleanRequest, require_new_reports
from pipelines.output.harness import preflight
from pipelines.output.remote_commit import commit_staged, remove_finished_staging, staging_path
from pipelines.output.report import RunReport
from pipelines.output.staging import require_writable
from pipelines.runtime.faults import fault_point
from pipelines.runtime.spark_handle import Spark
from pipelines.runtime.stop import raise_if_stopped, withdraw
from segment_io.remote.manifest import ORIGIN_CLEAN
from segment_io.remote.tier import RemoteTier
from segment_io.remote.view import tiered_url
from segment_io.storage import Location
from segment_io.text import counted

SEALED_BECAUSE = "a remote tier holds no active segment"


def clean_in_place(spark: Spark, request: CleanRequest, log: Callable[[str], Any] = print) -> RunReport:
    """Clean the remote tier at `request.src` in place (no DST; every topic; nothing linked or
    selected); returns `clean`'s report."""
    if request.dst is not None or request.topics is not None or request.link or request.select != "all":
        raise ConfigError("a clean in place takes the remote tier alone: no DST, topics, link or selection")
    remote_url = request.src.url
    tier = RemoteTier.open(remote_url)  # refuses a prefix that is not a remote tier
    require_new_reports(request.report_path)
    before = {tp: tier.read(tp) for tp in tier.partitions()}
    staging = staging_path(tier)
    staged = Location.at(tier.storage, staging)
    if not request.dry_run:  # a dry run writes and removes nothing
        remove_finished_staging(tier.storage, staging, log)
    request = replace(
        request,
        src=Location(tiered_url(remote_url, None)),
        dst=staged,
        config=request.config.all_sealed(SEALED_BECAUSE),
    )
    # The staging lies inside the tier by design (the commit below publishes it), so a clean's own
    # refusal of a destination inside its source does not apply; the tier's do, above, and the
    # staging must be free of another run's output.
    checked_request = preflight(request, lambda: require_writable(staged))
    try:
        result = run_clean(spark, checked_request, log)
    finally:
        withdraw(staged.url)  # the staging in the tier is not the output; the commit publishes it
    if request.dry_run:
        return result
    try:
        fault_point("in-place-cleaned")
        raise_if_stopped()
        starts = {m.partition: m.log_start_offset for m in result.partitions}
        committed = commit_staged(spark, tier, staged, before, ORIGIN_CLEAN, starts, log)
        log(f"segpipe: committed the cleaned log of {counted(committed, 'partition')} to {tier.url}")
    finally:
        tier.storage.remove(staging)
    return result
