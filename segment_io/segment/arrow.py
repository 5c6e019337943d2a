"""The one record schema (Arrow) and the deep scan's records as Arrow columns, built from buffers."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from segment_io.format import records as rec
from segment_io.format.constants import (
    CODEC_LABELS,
    CODEC_MASK,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    TIMESTAMP_TYPE_LABELS,
    TRANSACTIONAL_MASK,
)
from segment_io.segment.framing import Framed
from segment_io.segment.scan import BatchTable

RECORD_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("timestamp_type", pa.string()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        (
            "headers",
            pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
        ),
        ("segment_base_offset", pa.int64()),
        ("batch_position", pa.int64()),
        ("batch_base_offset", pa.int64()),
        ("batch_last_offset", pa.int64()),
        ("magic", pa.int8()),
        ("codec", pa.string()),
        ("is_transactional", pa.bool_()),
        ("is_control", pa.bool_()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int16()),
        ("base_sequence", pa.int32()),
        ("partition_leader_epoch", pa.int32()),
        ("delete_horizon_ms", pa.int64()),
    ]
)


def _strings(names: tuple[str, ...], codes: np.ndarray) -> pa.Array:
    """A utf8 column holding names[code] per row (an Arrow take, no Python object per row)."""
    return pa.array(names, pa.string()).take(pa.array(codes))


def framed_to_arrow(
    framed: Framed, table: BatchTable, topic: str, partition: int, segment_base_offset: int
) -> pa.RecordBatch:
    """Arrow columns of the deep scan, built from buffers (no Python object per record)."""
    s = framed.sections
    n = len(framed)
    data = s.data

    def per_record(batch_values: np.ndarray) -> np.ndarray:
        """Broadcast a batch-table column to the records (of any subset: Framed.take) framed."""
        return batch_values[s.batch_index][framed.record_batch]

    def per_section(values: np.ndarray) -> np.ndarray:
        return values[framed.record_batch]

    header_total = int(framed.header_count.sum())
    hk_start = np.empty(header_total, dtype=np.int64)
    hk_len = np.empty(header_total, dtype=np.int64)
    hv_start = np.empty(header_total, dtype=np.int64)
    hv_len = np.empty(header_total, dtype=np.int64)
    rec.parse_headers(data, framed.header_start, framed.header_count, hk_start, hk_len, hv_start, hv_len)
    header_struct = pa.StructArray.from_arrays(
        [rec.binary_array(data, hk_start, hk_len, string=True), rec.binary_array(data, hv_start, hv_len)],
        names=["key", "value"],
    )
    list_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(framed.header_count, out=list_offsets[1:])
    headers = pa.ListArray.from_arrays(pa.array(list_offsets), header_struct)
    magic = table.magic[s.batch_index]
    attrs = table.attributes[s.batch_index]
    # Labels by timestamp type + 1; codecs above zstd never get past the scan.
    ts_type = table.timestamp_type[s.batch_index] + 1
    has_horizon = per_section((magic == 2) & ((attrs & DELETE_HORIZON_MASK) != 0))
    columns = [
        _strings((topic,), np.zeros(n, dtype=np.int64)),
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(framed.offset),
        pa.array(framed.timestamp),
        _strings(TIMESTAMP_TYPE_LABELS, per_section(ts_type)),
        rec.binary_array(data, framed.key_start, framed.key_len),
        rec.binary_array(data, framed.value_start, framed.value_len),
        headers,
        pa.array(np.full(n, segment_base_offset, dtype=np.int64)),
        pa.array(per_record(table.position)),
        pa.array(per_section(s.first_offset)),
        pa.array(per_record(table.last_offset)),
        pa.array(per_section(magic.astype(np.int8))),
        _strings(CODEC_LABELS, per_section(attrs & CODEC_MASK)),
        pa.array(per_section((magic == 2) & ((attrs & TRANSACTIONAL_MASK) != 0))),
        pa.array(per_section((magic == 2) & ((attrs & CONTROL_MASK) != 0))),
        pa.array(per_record(table.producer_id)),
        pa.array(per_record(table.producer_epoch).astype(np.int16)),
        pa.array(per_record(table.base_sequence).astype(np.int32)),
        pa.array(per_record(table.leader_epoch).astype(np.int32)),
        pa.array(per_record(table.base_timestamp), mask=~has_horizon),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=RECORD_SCHEMA)
