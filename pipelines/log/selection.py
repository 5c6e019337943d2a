"""Kafka's choice of which compacted partitions its cleaner works on now (`--select kafka`).

A partition is chosen when its dirty ratio — the bytes of the segments from the one holding the
first dirty offset up to the first uncleanable one, over those plus the bytes below the first
dirty offset — is strictly above `min.cleanable.dirty.ratio`; or when compaction is overdue:
among the inactive segments from the one holding the first dirty offset, the smallest first-batch
max timestamp (values ≤ 0 ignored) is older than `now - max.compaction.lag.ms`, and there are
cleanable bytes; or, failing both, when a batch's delete horizon (tombstones and markers that a
first pass stamped) has passed and a pass would remove them. Without `--select kafka` segpipe
cleans every cleanable range it is given, as an offline tool may.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipelines.config import TopicConfig
from pipelines.log.scan import ScannedSegment


@dataclass(frozen=True)
class Selection:
    chosen: bool
    reason: str  # why it was chosen, or why not


def kafka_selection(
    alive: list[ScannedSegment], first_dirty: int, first_uncleanable: int, config: TopicConfig, now_ms: int
) -> Selection:
    bases = [s.meta.base_offset for s in alive]
    holding = max(0, int(np.searchsorted(bases, first_dirty, side="right")) - 1)
    clean_bytes = sum(s.meta.size for s in alive if s.meta.base_offset < first_dirty)
    dirty = [s for k, s in enumerate(alive) if k >= holding and s.meta.base_offset < first_uncleanable]
    cleanable_bytes = sum(s.meta.size for s in dirty)
    total = clean_bytes + cleanable_bytes
    ratio = cleanable_bytes / total if total else 0.0
    limit = config.min_cleanable_dirty_ratio
    if ratio > limit:
        return Selection(True, f"dirty ratio {ratio:.3f} > min.cleanable.dirty.ratio {limit}")
    inactive = alive if config.last_segment_sealed else alive[:-1]
    firsts = [int(s.table.max_timestamp[0]) for s in inactive[holding:] if len(s.table)]
    oldest = min((t for t in firsts if t > 0), default=None)
    lag = config.max_compaction_lag_ms
    if cleanable_bytes > 0 and oldest is not None and oldest < now_ms - lag:
        return Selection(True, f"max.compaction.lag.ms {lag} passed (oldest dirty batch at {oldest})")
    horizons = [
        int(t.base_timestamp[t.has_delete_horizon].min())
        for s in alive
        if (t := s.table).has_delete_horizon.any()
    ]
    if horizons and min(horizons) <= now_ms:
        return Selection(True, f"delete horizon {min(horizons)} passed: tombstones or markers to remove")
    why = f"dirty ratio {ratio:.3f} ≤ min.cleanable.dirty.ratio {limit}"
    return Selection(False, f"{why}, compaction not overdue, no delete horizon passed")
