"""Records as flat columns (Arrow's layout: offsets, data, a null mask per field), the input of
the record encoder; built from columns by the jobs, from tuples by tests and small writers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from segment_io.format.records import encode_records


@dataclass(frozen=True)
class RecordColumns:
    """Records as flat columns: the input of `encode` (Arrow layout: offsets + data + null mask)."""

    offset_delta: np.ndarray
    timestamp_delta: np.ndarray
    key_offsets: np.ndarray
    key_data: np.ndarray
    key_null: np.ndarray
    value_offsets: np.ndarray
    value_data: np.ndarray
    value_null: np.ndarray
    header_offsets: np.ndarray
    hkey_offsets: np.ndarray
    hkey_data: np.ndarray
    hvalue_offsets: np.ndarray
    hvalue_data: np.ndarray
    hvalue_null: np.ndarray

    def __len__(self) -> int:
        return int(self.offset_delta.shape[0])

    def encode(self) -> bytes:
        return encode_records(
            self.offset_delta,
            self.timestamp_delta,
            self.key_offsets,
            self.key_data,
            self.key_null,
            self.value_offsets,
            self.value_data,
            self.value_null,
            self.header_offsets,
            self.hkey_offsets,
            self.hkey_data,
            self.hvalue_offsets,
            self.hvalue_data,
            self.hvalue_null,
        ).tobytes()

    @classmethod
    def from_records(
        cls,
        records: list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    ) -> RecordColumns:
        """Build from (offset delta, timestamp delta, key, value, headers) tuples (small inputs)."""
        keys = _pack([r[2] for r in records])
        values = _pack([r[3] for r in records])
        headers = [h for r in records for h in r[4]]
        hkeys = _pack([k.encode() for k, _ in headers])
        hvalues = _pack([v for _, v in headers])
        counts = np.array([len(r[4]) for r in records], dtype=np.int64)
        return cls(
            np.array([r[0] for r in records], dtype=np.int64),
            np.array([r[1] for r in records], dtype=np.int64),
            *keys,
            *values,
            np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            hkeys[0],
            hkeys[1],
            *hvalues,
        )


def _pack(items: list[bytes | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lengths = np.array([0 if x is None else len(x) for x in items], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    data = np.frombuffer(b"".join(x for x in items if x is not None), dtype=np.uint8)
    null = np.array([x is None for x in items], dtype=np.bool_)
    return offsets, data, null
