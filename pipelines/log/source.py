"""The log a run reads, decided once before any work: where it is (a plain log directory, a log
and segpipe's remote tier, or a broker's log directory read with Kafka's tier), opened once, its
listing, and the topics of it the run keeps, checked against what it holds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pipelines.config import JobConfig
from pipelines.config.selection import TopicSelection
from pipelines.errors import ConfigError
from segment_io.kafka_tier.url import KafkaTierSource
from segment_io.layout import LogDirListing, list_log_dir
from segment_io.remote.view import log_location
from segment_io.storage import Location, Place


@dataclass(frozen=True)
class Source:
    """A run's source: `log` (every stage, check and gate of the run reads this one opened
    Location), `named` (as the operator wrote it, for messages), its listing, and the topics of it
    the run keeps (`selection` over the topics present)."""

    log: Location
    named: str
    listing: LogDirListing
    selection: TopicSelection

    @property
    def topics(self) -> list[str]:
        """The topics present that the run keeps, by name."""
        return sorted({p.tp.topic for p in self.listing.partitions if self.selection(p.tp.topic)})

    @property
    def kept(self) -> TopicSelection | None:
        """The selection as a request holds it: None where it keeps every topic."""
        return None if self.selection.everything else self.selection

    @property
    def near_bytes(self) -> int:
        """The bytes of its partitions where its files are near (placement's measure); 0 where
        they are not, so a far log is never sized just to guess where work runs."""
        return sum(p.size for p in self.listing.partitions) if self.log.near else 0


def open_source(
    path: Place,
    *,
    remote: Place | None = None,
    kafka_tier: KafkaTierSource | None = None,
    config: JobConfig | None = None,
    patterns: tuple[str, ...] = (),
    named: str | None = None,
    warn: Callable[[str], None] | None = None,
) -> Source:
    """The source at `path` (with `remote` or `kafka_tier`, as `log_location` reads them), listed
    once. Refused before Spark starts: per-topic configs (`config`) for topics it does not hold,
    and a pattern that matches none of its topics (a misspelt name would otherwise quietly drop
    the topic it meant from the output)."""
    log = log_location(path, remote, kafka_tier, warn)
    where = named or (path if isinstance(path, str) else path.url)
    listing = list_log_dir(log.storage, log.path)
    present = {p.tp.topic for p in listing.partitions}
    (config or JobConfig()).require_topics(present, where)
    selection = TopicSelection(patterns)
    unmatched = selection.unmatched(present)
    if unmatched:
        there = ", ".join(sorted(present)) or "none"
        raise ConfigError(f"topic {', '.join(unmatched)} matches no topic of {where} (topics there: {there})")
    return Source(log, where, listing, selection)
