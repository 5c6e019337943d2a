"""The v2 batch header's field positions are one table (segment_io.format.constants): batch.py's
struct lays the fields out at exactly those positions, and the scan kernel reads a batch kafka-python
wrote at them."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from segment_io.format import batch, constants
from segment_io.segment.scan import scan_buffer

pytestmark = pytest.mark.unit
FIELDS = (
    "BASE_OFFSET_AT",
    "BATCH_LENGTH_AT",
    "LEADER_EPOCH_AT",
    "MAGIC_OFFSET",
    "CRC_OFFSET",
    "ATTRIBUTES_OFFSET",
    "LAST_OFFSET_DELTA_AT",
    "BASE_TIMESTAMP_AT",
    "MAX_TIMESTAMP_AT",
    "PRODUCER_ID_AT",
    "PRODUCER_EPOCH_AT",
    "BASE_SEQUENCE_AT",
    "RECORDS_COUNT_AT",
)


def test_the_struct_lays_out_the_fields_where_the_table_says() -> None:
    layout = batch._V2.format.lstrip(">")
    positions = [struct.calcsize(">" + layout[:i]) for i in range(len(layout))]
    assert positions == [getattr(constants, name) for name in FIELDS]
    assert batch._V2.size == constants.V2_HEADER_SIZE


def test_the_scan_reads_a_batch_kafka_python_wrote_at_those_positions() -> None:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=1,
        producer_id=4711,
        producer_epoch=3,
        base_sequence=17,
        batch_size=1 << 20,
    )
    for i in range(5):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"v", headers=[])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, constants.BASE_OFFSET_AT, 1000)
    struct.pack_into(">i", data, constants.LEADER_EPOCH_AT, 9)
    table = scan_buffer("mem", 1000, np.frombuffer(bytes(data), dtype=np.uint8)).table
    assert (int(table.base_offset[0]), int(table.last_offset[0]), int(table.leader_epoch[0])) == (
        1000,
        1004,
        9,
    )
    assert (int(table.producer_id[0]), int(table.producer_epoch[0]), int(table.base_sequence[0])) == (
        4711,
        3,
        17,
    )
    assert (int(table.max_timestamp[0]), int(table.records_count[0])) == (1_700_000_000_004, 5)
