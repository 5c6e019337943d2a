"""What Kafka's rules allow a clean of SRC to remove, per partition, worked out from SRC alone: its
scan (batch headers and CRCs), its root checkpoints, the topic configs and `now`, planned by the
same pure planner `clean` runs (pipelines.log.plan). The output's checkpoints, manifest
and run report are claims judged against this, never the measure of it (docs/validation.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipelines.config import JobConfig
from pipelines.config.terms import Terms
from pipelines.errors import ConfigError
from pipelines.log.plan import PartitionPlan, plan_log
from pipelines.log.producers import known_producers_of
from pipelines.log.scanned import scan_log
from segment_io.errors import SegmentError
from segment_io.layout import CLEANER_CHECKPOINT, LOG_START_CHECKPOINT, LogDirListing, list_log_dir
from segment_io.storage import Location
from segment_io.topic_partition import TopicPartition

NEEDS = "--now and --config/--set/--topic-set (the topic configs and `now` it was cleaned with)"


@dataclass(frozen=True)
class Allowed:
    """One source partition: below `log_start_offset` records may go (the retention cut); in
    [log_start_offset, cleanable_end) only each key's latest value must stay (compaction); at and
    above both, every record must stay. `cleaned_end` is the highest cleaner checkpoint the rules
    justify; the cleaner's key map starts at `first_dirty`."""

    log_start_offset: int
    first_dirty: int | None  # None: the rules compact nothing in this partition now
    cleanable_end: int | None
    cleaned_end: int

    @property
    def keep_all_from(self) -> int:
        """Every record at or above this offset must be in the output."""
        return max(self.log_start_offset, self.cleanable_end or 0)


def allowed_by(plan: PartitionPlan, source_cleaner: int | None) -> Allowed:
    """What `plan` (the clean of one source partition) may remove. A compaction moves the cleaner
    checkpoint to its end; without one the source's own entry stands (up to the log end)."""
    c = plan.compaction
    carried = min(source_cleaner, plan.log_end_offset) if source_cleaner is not None else 0
    cleaned_end = max(plan.log_start_offset, carried, c.end_offset if c is not None else 0)
    if c is None:
        return Allowed(plan.log_start_offset, None, None, cleaned_end)
    return Allowed(plan.log_start_offset, c.first_dirty, c.first_uncleanable, cleaned_end)


def promise_terms(
    path: str, manifest: dict[str, Any] | None, config: JobConfig | None, now_ms: int | None
) -> Terms:
    """The terms of `validate PATH --against SRC`: the flags where given, else what PATH's segpipe
    manifest recorded of the run that made it; with neither, a refusal naming the flags (a
    promise without terms would allow everything or nothing)."""
    recorded = manifest or {}
    if config is None and isinstance(recorded.get("configs"), dict):
        config = JobConfig.from_description(recorded["configs"])
        origin = "manifest"
    else:
        origin = "flags"
    if now_ms is None and isinstance(recorded.get("now_ms"), int):
        now_ms = int(recorded["now_ms"])
    if config is None or now_ms is None:
        what = "configs" if now_ms is not None else ("now" if config is not None else "configs and now")
        raise ConfigError(
            f"validate --against needs the {what} {path} was cleaned with, to work out from the source "
            f"what Kafka's rules allow removed; {path} holds no segpipe manifest that records them: "
            f"give {NEEDS}"
        )
    topics = recorded.get("topics")
    selection = (
        frozenset(str(t) for t in topics) if origin == "manifest" and isinstance(topics, list) else None
    )
    return Terms(config, now_ms, selection, origin)


@dataclass(frozen=True)
class SourcePlan:
    """SRC as the rules see it: per partition what may go, the listing, and the partitions whose
    data is bad (nothing can be promised of those)."""

    log: Location  # SRC as read
    listing: LogDirListing
    allowed: dict[TopicPartition, Allowed]
    bad: dict[TopicPartition, SegmentError]
    unselected: tuple[str, ...] = ()  # SRC's topics outside the output's topic selection


def plan_source(sc: Any, src: Location, terms: Terms, log: Callable[[str], Any]) -> SourcePlan:
    """Scan SRC (one Spark job over its batch headers, bad partitions set aside as `clean
    --on-corrupt skip-partition` would) and plan every partition under `terms`."""

    scanned = scan_log(sc, src, log, skip_corrupt=True, topics=terms.selects)
    cleaners = scanned.listing.checkpoints.get(CLEANER_CHECKPOINT, {})
    plans = plan_log(
        scanned.listing,
        scanned.segments,
        terms.config,
        terms.now_ms,
        False,
        known_producers_of(scanned, lambda line: None),
    )
    allowed = {p.tp: allowed_by(p, cleaners.get(p.tp)) for p in plans}
    unselected: tuple[str, ...] = ()
    if terms.topics is not None:
        everything = list_log_dir(scanned.storage, scanned.listing.path).partitions
        unselected = tuple(sorted({p.tp.topic for p in everything} - terms.topics))
    return SourcePlan(src, scanned.listing, allowed, dict(scanned.skipped), unselected)


def claim_problems(allowed: Allowed, output_log_start: int | None, output_cleaner: int | None) -> list[str]:
    """The output's checkpoint entries the rules do not justify, each with its reason."""
    problems = []
    if output_log_start is not None and output_log_start > allowed.log_start_offset:
        problems.append(
            f"{LOG_START_CHECKPOINT} says {output_log_start}; the source's retention allows at most "
            f"{allowed.log_start_offset}"
        )
    if output_cleaner is not None and output_cleaner > allowed.cleaned_end:
        problems.append(
            f"{CLEANER_CHECKPOINT} says {output_cleaner}; the rules let the cleaner reach at most "
            f"{allowed.cleaned_end}"
        )
    return problems
