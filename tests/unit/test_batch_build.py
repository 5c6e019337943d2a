"""Many v2 batches assembled in one kernel call are, byte for byte, what the one-batch builder
makes (header fields of every sign and width, empty and large sections), with the hardware CRC
or the package's software one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segment_io.format.batch import build_v2_batch
from segment_io.format.batch_build import V2Headers, build_v2_batches
from segment_io.format.checksums import NATIVE_CRC32C

pytestmark = pytest.mark.unit

_row = st.fixed_dictionaries(
    {
        "base_offset": st.integers(0, 2**63 - 1),
        "records_count": st.integers(0, 2**31 - 1),
        "last_offset_delta": st.integers(0, 2**31 - 1),
        "base_timestamp": st.integers(-(2**63), 2**63 - 1),
        "max_timestamp": st.integers(-(2**63), 2**63 - 1),
        "attributes": st.integers(0, 0xFF),
        "partition_leader_epoch": st.integers(-(2**31), 2**31 - 1),
        "producer_id": st.integers(-(2**63), 2**63 - 1),
        "producer_epoch": st.integers(-(2**15), 2**15 - 1),
        "base_sequence": st.integers(-(2**31), 2**31 - 1),
        "records": st.binary(max_size=300),
    }
)


def _one_by_one(rows: list[dict]) -> bytes:  # type: ignore[type-arg]
    return b"".join(build_v2_batch(**row) for row in rows)


def _at_once(rows: list[dict], native: bool) -> tuple[bytes, list[int]]:  # type: ignore[type-arg]
    names = list(V2Headers.__dataclass_fields__)
    headers = V2Headers(**{n: np.array([r[n] for r in rows], dtype=np.int64) for n in names})
    data, sizes = build_v2_batches(headers, [r["records"] for r in rows], native_crc=native)
    return data.tobytes(), sizes.tolist()


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(_row, max_size=6), native=st.booleans())
def test_batches_built_at_once_equal_those_built_one_by_one(rows: list[dict], native: bool) -> None:  # type: ignore[type-arg]
    data, sizes = _at_once(rows, native and NATIVE_CRC32C)
    assert data == _one_by_one(rows)
    assert sizes == [len(build_v2_batch(**row)) for row in rows]
