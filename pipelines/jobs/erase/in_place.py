"""`erase REMOTE_URL --in-place`: the listed keys' records removed inside a remote tier.

The tier is erased like any log (its segments are all inactive) into a staging prefix inside the
tier, and committed as new objects of the tier, one new manifest version per partition
(output.remote_commit): readers of the old version keep its objects until `tier --expire` removes
them after the grace period, and only then are the erased records gone from the bucket. The
staging prefix is removed at the end, or by the next run."""

from __future__ import annotations

from dataclasses import replace

from pipelines.jobs.erase.evidence import EraseReport
from pipelines.jobs.erase.job import Gate, run_erase
from pipelines.jobs.erase.request import EraseRequest
from pipelines.log.scanned import Log
from pipelines.output.destination import require_new_file
from pipelines.output.harness import preflight
from pipelines.output.remote_commit import commit_staged, remove_finished_staging, staging_path
from pipelines.output.staging import require_writable
from pipelines.runtime.faults import fault_point
from pipelines.runtime.spark_handle import Spark
from pipelines.runtime.stop import raise_if_stopped, withdraw
from segment_io.remote.manifest import ORIGIN_ERASE
from segment_io.remote.tier import RemoteTier
from segment_io.remote.view import tiered_url
from segment_io.storage import Location
from segment_io.text import counted


def erase_in_place(
    spark: Spark, request: EraseRequest, log: Log = print, gate: Gate | None = None
) -> EraseReport:
    """Erase `request`'s keys from the remote tier at `request.src` (no DST: its `dst` is unused)."""
    tier = RemoteTier.open(request.src.url)  # refuses a prefix that is not a remote tier
    if request.report_path:
        require_new_file(request.report_path)
    before = {tp: tier.read(tp) for tp in tier.partitions()}
    staging = staging_path(tier)
    if not request.dry_run:  # a dry run writes and removes nothing
        remove_finished_staging(tier.storage, staging, log)
    staged = replace(
        request, src=Location(tiered_url(request.src.url, None)), dst=Location.at(tier.storage, staging)
    )
    # The staging lies inside the tier by design (the commit below publishes it), so an erase's own
    # refusal of a destination inside its source does not apply; the tier's do, above, and the
    # staging must be free of another run's output.
    checked_request = preflight(staged, lambda: require_writable(staged.out))
    try:
        report = run_erase(spark, checked_request, log, gate)
    finally:
        withdraw(staged.out.url)  # the staging in the tier is not the output; the commit publishes it
    report.src = report.dst = request.src.url
    report.remaining_copies = [
        f"{tier.url}: its replaced objects, until `segpipe tier --expire` removes them after the grace",
        "the log directory this tier was uploaded from: its local segments (those not yet tiered too); "
        "`restore --local` refuses it unless --keys shows it holds no listed key",
    ]
    if request.dry_run:
        return report
    try:
        fault_point("in-place-erased")
        raise_if_stopped()
        committed = commit_staged(spark, tier, staged.out, before, ORIGIN_ERASE, {}, log)
        log(f"segpipe: committed the erased log of {counted(committed, 'partition')} to {tier.url}")
        for copy in report.remaining_copies:
            log(f"segpipe: note: the listed keys' records remain in {copy}")
    finally:
        tier.storage.remove(staging)
    return report
