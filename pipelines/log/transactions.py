"""Producer and transaction state replayed from batch headers: which producers are active,
where open transactions start, which data batches were aborted."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipelines.log.scan import ScannedSegment
from segment_io.format.constants import ControlType


@dataclass
class Producer:
    """What the replay knows of one producer id (docs/cleaning-rules.md#producer-state)."""

    epoch: int = -1
    last_data_offset: int | None = None
    last_timestamp: int = -1
    open_txn_first: int | None = None


def producer_state(segments: list[ScannedSegment]) -> dict[int, Producer]:
    """Replay every batch with a producer id in offset order."""
    state: dict[int, Producer] = {}
    for s in segments:
        t = s.table
        for pid, epoch, control, last, base, ts, txn in zip(
            t.producer_id.tolist(),
            t.producer_epoch.tolist(),
            t.is_control.tolist(),
            t.last_offset.tolist(),
            t.base_offset.tolist(),
            t.max_timestamp.tolist(),
            t.is_transactional.tolist(),
            strict=True,
        ):
            if pid < 0:
                continue
            p = state.setdefault(pid, Producer())
            if epoch != p.epoch:
                p.last_data_offset = None
                p.epoch = epoch
            p.last_timestamp = ts
            if control:
                p.open_txn_first = None
            else:
                p.last_data_offset = last
                if txn and p.open_txn_first is None:
                    p.open_txn_first = base
    return state


@dataclass(frozen=True)
class OpenTransaction:
    """A transaction with data and no marker yet: the last stable offset stops at its first offset,
    so nothing from there on is cleaned or tiered until it ends."""

    producer_id: int
    first_offset: int

    def holds(self, what: str) -> str:
        """The line that says what it keeps from `what` (cleaning, tiering)."""
        return (
            f"an open transaction (producer id {self.producer_id}, first offset {self.first_offset}) keeps "
            f"offsets {self.first_offset} and above from {what} until its COMMIT or ABORT marker is written"
        )


def first_open_transaction(state: dict[int, Producer]) -> OpenTransaction | None:
    """The open transaction that starts first (the one the last stable offset stops at)."""
    opened = [(p.open_txn_first, pid) for pid, p in state.items() if p.open_txn_first is not None]
    if not opened:
        return None
    first, pid = min(opened)
    return OpenTransaction(pid, first)


def aborted_data_batches(segments: list[ScannedSegment]) -> list[np.ndarray]:
    """Per segment, per batch: a transactional data batch whose producer's next marker is ABORT
    (docs/cleaning-rules.md#transactions)."""
    out = [np.zeros(len(s.table), dtype=np.bool_) for s in segments]
    next_marker: dict[int, int] = {}
    for k in range(len(segments) - 1, -1, -1):
        t = segments[k].table
        controls = segments[k].controls
        control = t.is_control
        for i in np.flatnonzero(t.is_transactional & (t.producer_id >= 0))[::-1].tolist():
            pid = int(t.producer_id[i])
            if control[i]:
                next_marker[pid] = int(controls[i])
            elif next_marker.get(pid) == ControlType.ABORT:
                out[k][i] = True
    return out
