"""Which batches of a partition keep an empty header when an erase removes all their records:
its producer's last data batch (the broker rebuilds a producer's sequence and epoch from it) and
the log's last batch (it holds the log end offset). Every other emptied batch is dropped, as
Kafka's cleaner drops it. Pure: batch tables in, one mask per segment out."""

from __future__ import annotations

import numpy as np

from segment_io.segment.scan import BatchTable


def retain_empty(tables: list[BatchTable]) -> list[np.ndarray]:
    """Per segment (in offset order), per batch: whether an emptied batch keeps an empty header.

    Kafka keeps the last batch of an *active* producer; an archive has no clock that says which
    producers a broker would still hold, so every producer's last data batch is kept (a header
    too many costs 61 bytes; one too few loses a producer's state)."""
    sizes = [len(t) for t in tables]
    if not sum(sizes):
        return [np.zeros(0, dtype=np.bool_) for _ in tables]
    pid = np.concatenate([t.producer_id for t in tables])
    last = np.concatenate([t.last_offset for t in tables])
    data = ~np.concatenate([t.is_control for t in tables]) & (pid >= 0)
    keep = np.zeros(len(pid), dtype=np.bool_)
    mine = np.flatnonzero(data)
    if len(mine):
        order = mine[np.lexsort((last[mine], pid[mine]))]
        # In (producer, last offset) order, a producer's last data batch is where its run ends.
        ends = np.flatnonzero(np.concatenate([pid[order][1:] != pid[order][:-1], [True]]))
        keep[order[ends]] = True
    keep[int(np.argmax(last))] = True  # the batch that ends the log
    return np.split(keep, np.cumsum(sizes)[:-1])
