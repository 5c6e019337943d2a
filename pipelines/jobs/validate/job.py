"""`validate`: great-expectations suites over a log directory read through the kafka-segments data
source, with the Data Docs written where the caller says. File-level rules run first, per
partition in parallel; the records of partitions whose files are sound are then judged rule by
rule. Every failure names its rule, partition, offset and key."""

from __future__ import annotations

import json
import os
import posixpath
import time
from dataclasses import replace
from typing import Any

from pipelines.clock import iso
from pipelines.config import JobConfig
from pipelines.config.terms import Terms
from pipelines.jobs.validate.allowed import SourcePlan, claim_problems, plan_source, promise_terms
from pipelines.jobs.validate.checkpoint import gx_context, run_suite
from pipelines.jobs.validate.checks import (
    IDENTITY,
    Bounds,
    FileCheck,
    PartitionVerdicts,
    count_checks,
    file_checks,
    record_checks,
)
from pipelines.jobs.validate.cut_promise import cut_verdicts, is_cut
from pipelines.jobs.validate.docs_page import write_page
from pipelines.jobs.validate.frames import collected, kept, of_kind, with_key_b64
from pipelines.jobs.validate.promise import PROMISE_RULES, PartitionPair, promise_rows
from pipelines.jobs.validate.report import Log, ValidationReport
from pipelines.jobs.validate.request import ValidateRequest
from pipelines.jobs.validate.suites import (
    partition_suite,
    promise_suite,
    record_structure_suite,
)
from pipelines.jobs.validate.user_suites import UserSuite, gx_suite, records_frame, require_topics
from pipelines.output.harness import Checked, checked, job_run
from pipelines.output.inventory import INVENTORY, inventory_problems
from pipelines.output.staging import ERASE_JOB, MANIFEST_JOB, REPORT, published_manifest
from pipelines.runtime.session import LazySpark, session_of
from pipelines.runtime.spark_handle import Spark
from pipelines.runtime.tasks import fits_driver
from segment_io.format.constants import INT64_MAX
from segment_io.layout import (
    CLEANER_CHECKPOINT,
    LOG_START_CHECKPOINT,
    META_DIR,
    LogDirListing,
    PartitionListing,
    list_log_dir,
)
from segment_io.remote.view import described
from segment_io.storage import Location, Place, Storage
from segment_io.topic_partition import TopicPartition

WORKER_MODULES = ("pipelines.jobs.validate.checks",)
TERMS_FROM = {"flags": "given", "manifest": "recorded in its manifest", "run": "of this run"}
# A failed expectation lists this many of its rows (and counts all of them).


def default_report_dir(path: str) -> str | None:
    """Where the Data Docs of a local segpipe output go unless told: inside its `_segpipe/`."""
    meta = os.path.join(path, META_DIR)
    return (
        os.path.join(os.path.abspath(meta), "validation")
        if "://" not in path and os.path.isdir(meta)
        else None
    )


def needs_spark(request: ValidateRequest) -> bool:
    """Whether the validation `request` asks for will need Spark: its rows are made in the driver
    where every file is near and few enough bytes (tasks.fits_driver); an operator suite reads
    records through the kafka-segments source."""
    if request.suites:
        return True
    opened = [at for at in (request.log, request.source) if at is not None]
    if not all(at.near for at in opened):  # far files never pass the driver: no listing
        return True
    size = sum(
        p.size for at in opened for p in list_log_dir(at.storage, at.path, allow_incomplete=True).partitions
    )
    return not fits_driver(True, size)


def validate(
    spark: Spark,
    path: Place,
    remote: Place | None = None,
    report_dir: str | None = None,
    log: Log = print,
    against: Place | None = None,
    now_ms: int | None = None,
    staged: bool = False,
    config: JobConfig | None = None,
    terms: Terms | None = None,
    suites: tuple[UserSuite, ...] = (),
) -> ValidationReport:
    """Run the structure suites over PATH (and its remote tier) and, with `against` (the source
    PATH was cleaned from), the promise: what Kafka's rules let a clean of the source remove (the
    options: ValidateRequest). `spark`: a session, or a LazySpark started only where a step needs
    Spark (a small local log is judged in the driver)."""
    request = ValidateRequest(
        path=Location.of(path),
        remote=Location.of_optional(remote),
        report_dir=report_dir,
        against=Location.of_optional(against),
        now_ms=now_ms,
        staged=staged,
        config=config,
        terms=terms,
        suites=suites,
    )
    return run_validate(spark, request, log)


def run_validate(
    spark: Spark, request: ValidateRequest | Checked[ValidateRequest], log: Log = print
) -> ValidationReport:
    """The validation `request` asks for (see `validate`). Its `now` is the request's or the one
    the output was cleaned at (`promise_terms`), not the run's."""
    request = checked(request)
    with job_run(spark, WORKER_MODULES) as run:
        return _validate(run.spark, request, log)


def _validate(spark: LazySpark, request: ValidateRequest, log: Log) -> ValidationReport:
    path, remote, report_dir, against = request.path.url, request.remote, request.report_dir, request.against
    staged, terms, suites, at = request.staged, request.terms, request.suites, request.log
    started = time.perf_counter()
    storage, root = at.storage, at.path
    listing = list_log_dir(storage, root, allow_incomplete=staged)
    manifest = None if staged else published_manifest(at)
    cut = against is not None and is_cut(manifest)  # a cut's promise: the source truncated, byte for byte
    if against is not None and terms is None and not cut:
        terms = promise_terms(path, manifest, request.config, request.now_ms)  # refused before any work
    require_topics(suites, {p.tp.topic for p in listing.partitions}, path)
    parts = list(listing.partitions)
    file_rows = file_checks(spark, at, parts)
    report = ValidationReport(path)
    run = _run_report(storage, root)
    for skipped in (run or {}).get("skipped", []):
        report.notes.append(
            f"segpipe: note: {path} holds no {skipped['partition']}: the clean that wrote it left that "
            f"partition out for bad data ({skipped['error']})"
        )
    sound = [
        p
        for p in parts
        if all(r.ok for r in file_rows if (r.topic, r.partition) == (p.tp.topic, p.tp.partition))
    ]
    gx, context = gx_context(report_dir)
    verdicts = PartitionVerdicts()
    for r in file_rows:
        verdicts.add(r.rule, r.topic, r.partition, r.ok, r.detail)
    _inventory(verdicts, manifest, listing, file_rows, remote, report)
    source = None
    if cut:
        assert request.source is not None and manifest is not None
        report.notes.append(
            f"segpipe: note: {path} is the output of a cut: it is judged as {described(request.source.url)} "
            "cut again at what its manifest records, segment for segment, byte for byte"
        )
        cut_verdicts(request.source, at, listing, manifest, verdicts)
    elif request.source is not None:
        assert terms is not None
        report.notes.append(
            f"segpipe: note: the promise is judged under the topic configs and now ({iso(terms.now_ms)}) "
            f"{TERMS_FROM[terms.origin]}"
        )
        source = plan_source(spark, request.source, terms, log)
    if sound:
        # Each expectation is its own Spark job: the checks are computed once for all of them and
        # kept, narrow (identity and one boolean per rule).
        bounds = _bounds_of(listing.checkpoints, source)
        erased = next(
            (
                where
                for where, doc in ((path, manifest), (against, _manifest_of(request.source)))
                if (doc or {}).get(MANIFEST_JOB) == ERASE_JOB
            ),
            None,
        )
        if erased is not None:
            # Holes are what an erase leaves, in any topic: only its source can judge them (a clean
            # of an erased log keeps them; its promise still checks every record it must keep).
            report.notes.append(
                f"segpipe: note: {erased} is the output of an erase: holes in the offsets are the records it "
                "removed (validate --erased FILE --against ITS_SOURCE proves them)"
            )
            bounds = {p.tp: replace(bounds.get(p.tp, Bounds()), compacted_end=INT64_MAX) for p in sound}
        with kept(record_checks(spark, at, sound, bounds)) as checks:
            run_suite(
                spark, gx, context, "records", record_structure_suite(gx), checks, list(IDENTITY), report
            )
    for index, suite in enumerate(suites):
        _user_suite(spark, gx, context, at.url, sound, suite, index, report)
    if source is not None:
        assert terms is not None
        _promise(spark, gx, context, at, sound, listing, source, terms, report, run, verdicts)
    if verdicts.rules:
        suite = partition_suite(gx, verdicts.rules)
        run_suite(spark, gx, context, "partitions", suite, verdicts.frame(), verdicts.identity, report)
    if report_dir is not None:
        context.build_data_docs(site_names=["segpipe"])  # once, from every suite's stored result
    report.seconds = time.perf_counter() - started
    if report_dir is not None:
        report.data_docs = write_page(report_dir, report)
    return report


def _promise(
    spark: Spark,
    gx: Any,
    context: Any,
    output: Location,
    sound: list[PartitionListing],
    listing: LogDirListing,
    source: SourcePlan,
    terms: Terms,
    report: ValidationReport,
    run: dict[str, Any] | None,
    verdicts: PartitionVerdicts,
) -> None:
    """The promise: output records come from the source unchanged, what the source's plan keeps
    is kept, the output's checkpoints are ones the plan justifies, and the run report's counts add
    up (where PATH has one). Each partition of the output is compared with the source's on a
    worker (pipelines.jobs.validate.promise)."""
    sources = {p.tp: p for p in source.listing.partitions}
    outputs = {p.tp: p for p in sound}
    present = {p.tp for p in listing.partitions}
    for tp, error in sorted(source.bad.items()):
        report.notes.append(f"segpipe: not compared: {tp}: the source's data is bad there ({error})")
    for topic in source.unselected:  # said on every run: PATH holds none of these records
        report.notes.append(
            f"segpipe: not compared: topic {topic}: the clean that wrote the output kept only topics "
            f"{', '.join(sorted(terms.topics or ()))}; the output holds none of its records"
        )
    cps = listing.checkpoints
    starts, cleaned = cps.get(LOG_START_CHECKPOINT, {}), cps.get(CLEANER_CHECKPOINT, {})
    for tp in sorted(set(sources) & present):
        problems = claim_problems(source.allowed[tp], starts.get(tp), cleaned.get(tp))
        verdicts.add("checkpoints_justified", tp.topic, tp.partition, not problems, "; ".join(problems))
    # The sound output partitions, and source partitions the output lacks altogether (those whose
    # files failed are judged by the structure suite only), but where the source itself is bad.
    tps = (set(outputs) | (set(sources) - present)) - set(source.bad)
    pairs = [
        PartitionPair(
            tp.topic, tp.partition, outputs.get(tp), sources.get(tp), source.allowed.get(tp), cleaned.get(tp)
        )
        for tp in sorted(tps)
    ]
    with kept(promise_rows(spark, pairs, output, source.log, terms.now_ms)) as rows:
        records = of_kind(rows, "count", keep=False)
        records = with_key_b64(records, ["topic", "partition", "offset", *PROMISE_RULES])
        run_suite(spark, gx, context, "promise", promise_suite(gx), records, list(IDENTITY), report)
        if run is not None:
            counted = {
                f"{r['topic']}-{r['partition']}": (int(r["n"]), int(r["m"]))
                for r in collected(of_kind(rows, "count"))
            }
            count_checks(verdicts, counted, run.get("partitions", []))


def _user_suite(
    spark: Spark,
    gx: Any,
    context: Any,
    url: str,
    sound: list[PartitionListing],
    suite: UserSuite,
    index: int,
    report: ValidationReport,
) -> None:
    """One of the operator's suites over the records of its topics' sound partitions (the others
    are named by the structure suites)."""
    dirs = [p.tp.dir_name for p in sound if p.tp.topic in suite.topics]
    if not dirs:
        report.notes.append(f"segpipe: note: suite {suite.path} not run: no sound partition of its topics")
        return
    with kept(records_frame(session_of(spark), url, suite, dirs)) as frame:
        run_suite(
            spark, gx, context, f"user-{index}", gx_suite(gx, suite, index), frame, list(IDENTITY), report
        )


def _inventory(
    verdicts: PartitionVerdicts,
    manifest: dict[str, Any] | None,
    listing: LogDirListing,
    file_rows: list[FileCheck],
    remote: Location | None,
    report: ValidationReport,
) -> None:
    """A segpipe output against the inventory its manifest recorded at publication: every partition
    present with the same segment files (names and sizes) and record count (`manifest_matches`)."""
    recorded = (manifest or {}).get(INVENTORY)
    if not isinstance(recorded, dict):
        return
    if remote is not None:  # the manifest inventories the output as published, before any tiering
        report.notes.append(
            "segpipe: note: with --remote the manifest's inventory of the output is not checked"
        )
        return
    counted = {f"{r.topic}-{r.partition}": r.records for r in file_rows}
    problems = inventory_problems(recorded, listing, counted)
    for name in sorted(set(recorded) | {str(p.tp) for p in listing.partitions}):
        topic, _, partition = name.rpartition("-")
        verdicts.add("manifest_matches", topic, int(partition), name not in problems, problems.get(name, ""))


def _run_report(storage: Storage, root: str) -> dict[str, Any] | None:
    """PATH's run report, where a segpipe clean wrote one."""
    path = posixpath.join(root, META_DIR, REPORT)
    return json.loads(storage.read(path)) if storage.exists(path) else None


def _manifest_of(source: Location | None) -> dict[str, Any] | None:
    return None if source is None else published_manifest(source)


def _bounds_of(
    checkpoints: dict[str, dict[Any, int]], source: SourcePlan | None
) -> dict[TopicPartition, Bounds]:
    """Per partition: the output's log start offset and cleaner checkpoint, and where holes are
    explained: below the cleaner checkpoint, or below what the source's rules justify."""
    starts = checkpoints.get(LOG_START_CHECKPOINT, {})
    cleaned = checkpoints.get(CLEANER_CHECKPOINT, {})
    justified = {tp: a.cleaned_end for tp, a in (source.allowed if source else {}).items()}
    out = {}
    for tp in set(starts) | set(cleaned) | set(justified):
        ends = [e for e in (cleaned.get(tp), justified.get(tp)) if e is not None]
        out[tp] = Bounds(starts.get(tp), cleaned.get(tp), max(ends) if ends else None)
    return out
