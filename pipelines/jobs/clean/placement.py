"""Where a clean will likely work, guessed before its scan so Spark (or the driver's processes)
can start while the source is read; the job decides again from the scan's sizes
(`runtime.tasks.fits_driver_compaction`), and a wrong guess only costs time."""

from __future__ import annotations

from pipelines.config import JobConfig
from pipelines.log.source import Source
from pipelines.runtime.tasks import placement


def clean_placement(
    source: Source, config: JobConfig, select: str, suites: bool, cores: int | None
) -> tuple[bool, bool]:
    """(Spark likely needed, the driver's processes likely) for a clean of `source` (`cores`: a
    local master's, else None). Spark for an operator suite; otherwise `placement`'s rule, where a
    kept topic compacted (not `select="kafka"`, which may choose none) makes it a rewrite."""
    kept = set(source.topics)
    compacted = any(
        p.tp.topic in kept and config.for_topic(p.tp.topic).compact for p in source.listing.partitions
    )
    needed, local = placement(source.log.near, source.near_bytes, compacted and select != "kafka", cores)
    return suites or needed, local
