"""Magic 0/1 entries converted to v2-framed records sections, so every consumer downstream
handles one record layout (docs/log-format.md#legacy-entries)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from segment_io.errors import CorruptBatch
from segment_io.format.batch import LegacyEntry, parse_legacy_entry
from segment_io.format.compression import decompress
from segment_io.format.constants import LOG_OVERHEAD, MIN_ENTRY_SIZE, NO_TIMESTAMP, Codec
from segment_io.format.record_columns import RecordColumns


def _legacy_records(
    path: str, buf: np.ndarray, pos: int, size: int
) -> tuple[list[tuple[int, int, bytes | None, bytes | None]], bool, int]:
    """Inner records (offset, timestamp, key, value) of a legacy entry, whether timestamps are the
    wrapper's LogAppendTime, and the wrapper timestamp."""
    raw = buf[pos : pos + size].tobytes()
    entry = parse_legacy_entry(raw, 0, size)
    if isinstance(entry, str):
        raise CorruptBatch(path, pos, entry)
    log_append = entry.timestamp_type.value == 1
    if entry.codec == Codec.NONE:
        return [(entry.offset, entry.timestamp, entry.key, entry.value)], log_append, entry.timestamp
    if entry.value is None:
        raise CorruptBatch(path, pos, "compressed legacy wrapper has a null value")
    try:
        inner = decompress(entry.codec, entry.value, entry.magic)
    except ValueError as exc:
        raise CorruptBatch(path, pos, str(exc)) from None
    messages: list[LegacyEntry] = []
    p = 0
    while p < len(inner):
        if len(inner) - p < LOG_OVERHEAD + 6:
            raise CorruptBatch(path, pos, "compressed legacy wrapper ends inside an inner message")
        inner_size = int.from_bytes(inner[p + 8 : p + 12], "big", signed=True)
        if inner_size < MIN_ENTRY_SIZE or p + LOG_OVERHEAD + inner_size > len(inner):
            raise CorruptBatch(path, pos, f"inner message size {inner_size} is invalid")
        msg = parse_legacy_entry(inner, p, p + LOG_OVERHEAD + inner_size)
        if isinstance(msg, str):
            raise CorruptBatch(path, pos, f"inner message: {msg}")
        if msg.codec != Codec.NONE:
            raise CorruptBatch(path, pos, "nested compression inside a legacy wrapper")
        messages.append(msg)
        p += LOG_OVERHEAD + inner_size
    if not messages:
        raise CorruptBatch(path, pos, "compressed legacy wrapper holds no messages")
    out = []
    last_rel = messages[-1].offset
    for msg in messages:
        if entry.magic == 1 and entry.offset != 0:
            offset = entry.offset - last_rel + msg.offset
        else:
            offset = msg.offset
        ts = entry.timestamp if log_append else msg.timestamp
        out.append((offset, ts, msg.key, msg.value))
    return out, log_append, entry.timestamp


@dataclass(frozen=True)
class LegacySection:
    """A v0/v1 entry (or compressed wrapper) as a v2-framed records section, with what the
    conversion learns that its header could not tell."""

    data: bytes
    count: int
    first_offset: int
    base_timestamp: int  # NO_TIMESTAMP where a record has none (magic 0)
    max_timestamp: int  # the wrapper's
    log_append: bool


def legacy_section(path: str, buf: np.ndarray, pos: int, size: int) -> LegacySection:
    """The entry at `pos` (`size` bytes) converted; malformed entries raise CorruptBatch."""
    inner, la, wrapper_ts = _legacy_records(path, buf, pos, size)
    first, first_ts = inner[0][0], inner[0][1]
    cols = RecordColumns.from_records(
        [(o - first, (t - first_ts) if t >= 0 and first_ts >= 0 else 0, kk, v, []) for o, t, kk, v in inner]
    )
    no_timestamp = first_ts < 0 or (not la and any(t < 0 for _, t, _, _ in inner))
    base_timestamp = NO_TIMESTAMP if no_timestamp else first_ts
    return LegacySection(cols.encode(), len(inner), first, base_timestamp, wrapper_ts, la)
