"""The topics of a source a run keeps, decided once before any work: its topic selection checked
against what the source holds."""

from __future__ import annotations

from pipelines.config import JobConfig
from pipelines.config.selection import TopicSelection
from pipelines.errors import ConfigError
from segment_io.storage import Location, Place


def source_topics(
    src: Place, config: JobConfig, patterns: tuple[str, ...], named: str | None = None
) -> tuple[TopicSelection, list[str]]:
    """The topics of SRC a run keeps, checked before Spark starts: per-topic configs for topics
    SRC does not hold are refused, and so is a pattern that matches none of its topics (a
    misspelt name would otherwise quietly drop the topic it meant from the output). `named`: SRC
    as the operator wrote it (the messages' name for it)."""
    from segment_io.layout import list_log_dir

    src = Location.of(src)
    where = named or src.url
    present = {p.tp.topic for p in list_log_dir(src.storage, src.path).partitions}
    config.require_topics(present, where)
    selection = TopicSelection(patterns)
    unmatched = selection.unmatched(present)
    if unmatched:
        there = ", ".join(sorted(present)) or "none"
        raise ConfigError(f"topic {', '.join(unmatched)} matches no topic of {where} (topics there: {there})")
    return selection, sorted(t for t in present if selection(t))
