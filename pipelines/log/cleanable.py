"""The range a cleaner pass may compact and the output segments it fills: the log end offset, the
first uncleanable offset and Kafka's greedy grouping of the segments below it."""

from __future__ import annotations

import numpy as np

from pipelines.config import TopicConfig
from pipelines.log.scan import ScannedSegment
from segment_io.format.constants import INT32_MAX


def log_end_offset(segments: list[ScannedSegment]) -> int:
    leo = segments[-1].meta.base_offset if segments else 0
    for s in segments:
        if len(s.table):
            leo = max(leo, int(s.table.last_offset.max()) + 1)
    return leo


def segment_containing(segments: list[ScannedSegment], offset: int) -> int:
    bases = [s.meta.base_offset for s in segments]
    return max(0, int(np.searchsorted(bases, offset, side="right")) - 1)


def first_uncleanable_offset(
    segments: list[ScannedSegment],
    first_dirty: int,
    lso: int,
    leo: int,
    config: TopicConfig,
    now_ms: int,
) -> int:
    """min(LSO, active segment base, min.compaction.lag bound), snapped down to a segment base
    (docs/cleaning-rules.md#first-uncleanable-offset)."""
    bound = min(lso, leo)
    non_active = segments if config.last_segment_sealed else segments[:-1]
    if not config.last_segment_sealed and segments:
        bound = min(bound, segments[-1].meta.base_offset)
    if config.min_compaction_lag_ms > 0:
        start = segment_containing(segments, first_dirty)
        for s in non_active[start:]:
            if s.meta.largest_timestamp > now_ms - config.min_compaction_lag_ms:
                bound = min(bound, s.meta.base_offset)
                break
    if bound >= leo:
        return leo
    return segments[segment_containing(segments, bound)].meta.base_offset


def group_segments(segments: list[ScannedSegment], end_offset: int, config: TopicConfig) -> list[list[int]]:
    """Greedy groups of consecutive segments below `end_offset` (docs/cleaning-rules.md#grouping)."""
    recopy = [k for k, s in enumerate(segments) if s.meta.base_offset < end_offset]
    groups: list[list[int]] = []
    for pos, k in enumerate(recopy):
        seg = segments[k].meta
        if groups:
            g = groups[-1]
            first = segments[g[0]].meta
            nxt = segments[recopy[pos + 1]].meta.base_offset if pos + 1 < len(recopy) else end_offset
            estimated_last = nxt - 1
            fits = (
                sum(segments[i].meta.size for i in g) + seg.size <= config.segment_bytes
                and sum(segments[i].meta.index_bytes for i in g) + seg.index_bytes
                <= config.segment_index_bytes
                and sum(segments[i].meta.timeindex_bytes for i in g) + seg.timeindex_bytes
                <= config.segment_index_bytes
                and (seg.size == 0 or estimated_last - first.base_offset <= INT32_MAX)
            )
            if fits:
                g.append(k)
                continue
        groups.append([k])
    return groups
