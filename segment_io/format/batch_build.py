"""Many v2 batches assembled around their (already compressed) records sections in one numba
call, back to back in one buffer, each with its CRC-32C: what `batch.build_v2_batch` does for
one, without Python work per batch (a compaction rewrites tens of thousands of batches)."""

from __future__ import annotations

from dataclasses import dataclass

import crc32c
import numpy as np

from segment_io.format.checksums import NATIVE_CRC32C, crc32c_native
from segment_io.format.constants import (
    ATTRIBUTES_OFFSET,
    BASE_SEQUENCE_AT,
    BASE_TIMESTAMP_AT,
    BATCH_LENGTH_AT,
    CRC_OFFSET,
    LAST_OFFSET_DELTA_AT,
    LEADER_EPOCH_AT,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_AT,
    PRODUCER_EPOCH_AT,
    PRODUCER_ID_AT,
    RECORDS_COUNT_AT,
    V2_EMPTY_BATCH_LENGTH,
    V2_HEADER_SIZE,
)
from segment_io.kernel import njit


@dataclass(frozen=True)
class V2Headers:
    """Header fields of batches to assemble, one row each (the high attributes byte is 0)."""

    base_offset: np.ndarray
    records_count: np.ndarray
    last_offset_delta: np.ndarray
    base_timestamp: np.ndarray
    max_timestamp: np.ndarray
    attributes: np.ndarray
    partition_leader_epoch: np.ndarray
    producer_id: np.ndarray
    producer_epoch: np.ndarray
    base_sequence: np.ndarray


@njit(cache=True, nogil=True, inline="always")
def _put(out: np.ndarray, pos: int, value: int, nbytes: int) -> None:
    """`value` big-endian in `nbytes` bytes (two's complement)."""
    for i in range(nbytes):
        out[pos + nbytes - 1 - i] = (value >> (8 * i)) & 0xFF


@njit(cache=True, nogil=True)
def _assemble(
    payload: np.ndarray,
    bounds: np.ndarray,
    base_offset: np.ndarray,
    records_count: np.ndarray,
    last_offset_delta: np.ndarray,
    base_timestamp: np.ndarray,
    max_timestamp: np.ndarray,
    attributes: np.ndarray,
    epoch: np.ndarray,
    producer_id: np.ndarray,
    producer_epoch: np.ndarray,
    base_sequence: np.ndarray,
    native_crc: bool,
) -> tuple[np.ndarray, np.ndarray]:
    n = base_offset.shape[0]
    sizes = np.empty(n, dtype=np.int64)
    for j in range(n):
        sizes[j] = V2_HEADER_SIZE + bounds[j + 1] - bounds[j]
    out = np.empty(int(sizes.sum()), dtype=np.uint8)
    pos = 0
    for j in range(n):
        _put(out, pos, base_offset[j], 8)
        _put(out, pos + BATCH_LENGTH_AT, sizes[j] - LOG_OVERHEAD, 4)
        _put(out, pos + LEADER_EPOCH_AT, epoch[j], 4)
        out[pos + MAGIC_OFFSET] = 2
        out[pos + CRC_OFFSET : pos + ATTRIBUTES_OFFSET] = 0
        _put(out, pos + ATTRIBUTES_OFFSET, attributes[j] & 0xFF, 2)
        _put(out, pos + LAST_OFFSET_DELTA_AT, last_offset_delta[j], 4)
        _put(out, pos + BASE_TIMESTAMP_AT, base_timestamp[j], 8)
        _put(out, pos + MAX_TIMESTAMP_AT, max_timestamp[j], 8)
        _put(out, pos + PRODUCER_ID_AT, producer_id[j], 8)
        _put(out, pos + PRODUCER_EPOCH_AT, producer_epoch[j], 2)
        _put(out, pos + BASE_SEQUENCE_AT, base_sequence[j], 4)
        _put(out, pos + RECORDS_COUNT_AT, records_count[j], 4)
        out[pos + V2_HEADER_SIZE : pos + sizes[j]] = payload[bounds[j] : bounds[j + 1]]
        if native_crc:  # else left 0 for the caller
            crc = crc32c_native(out, pos + ATTRIBUTES_OFFSET, pos + sizes[j])
            _put(out, pos + CRC_OFFSET, crc, 4)
        pos += sizes[j]
    return out, sizes


def build_v2_batches(
    headers: V2Headers, sections: list[bytes], native_crc: bool = NATIVE_CRC32C
) -> tuple[np.ndarray, np.ndarray]:
    """The batches (back to back) and each one's size: batch `j` has header row `j` and records
    section `sections[j]`. `native_crc`: the CRCs by the hardware function (where it runs)."""
    bounds = np.zeros(len(sections) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in sections], out=bounds[1:])
    payload = np.frombuffer(b"".join(sections), dtype=np.uint8)
    h = headers
    out, sizes = _assemble(
        payload,
        bounds,
        h.base_offset,
        h.records_count,
        h.last_offset_delta,
        h.base_timestamp,
        h.max_timestamp,
        h.attributes,
        h.partition_leader_epoch,
        h.producer_id,
        h.producer_epoch,
        h.base_sequence,
        native_crc,
    )
    if not native_crc:  # the package's own (software) CRC, batch by batch
        view = memoryview(out.data)
        at = 0
        for size in sizes.tolist():
            crc = crc32c.crc32c(view[at + ATTRIBUTES_OFFSET : at + size])
            out[at + CRC_OFFSET : at + CRC_OFFSET + 4] = np.frombuffer(crc.to_bytes(4, "big"), dtype=np.uint8)
            at += size
    return out, sizes


assert V2_HEADER_SIZE == LOG_OVERHEAD + V2_EMPTY_BATCH_LENGTH  # the layout _assemble writes
