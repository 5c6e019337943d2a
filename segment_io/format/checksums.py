"""CRC-32C of every v2 batch of a segment in one numba call (the scan's hot path).

The kernel calls the hardware CRC-32C function of the `crc32c` package (SSE 4.2), which that
package's own `crc32c()` uses, so the scan costs no Python work per batch. It is used only where
the package says it runs on hardware; otherwise `segment.scan.verify_crcs` checks batch by batch.
"""

from __future__ import annotations

import crc32c
import numpy as np
from numba import types

from segment_io.format.constants import ATTRIBUTES_OFFSET
from segment_io.format.native import native, package_library
from segment_io.kernel import njit

_c_crc32c, _present = native(
    package_library("crc32c", "_crc32c*.so"),
    "_crc32c_hw_adler",
    types.uint32(types.uint32, types.uintp, types.uintp),
    0,
)
# The package enables its hardware function (and fills its tables) at import, on CPUs that have it.
NATIVE_CRC32C = _present and bool(getattr(crc32c, "hardware_based", False))


@njit(cache=True, nogil=True, inline="always")
def crc32c_native(buf: np.ndarray, lo: int, hi: int) -> int:
    """CRC-32C of buf[lo:hi] by the package's hardware function (only where NATIVE_CRC32C)."""
    return _c_crc32c(np.uint32(0xFFFFFFFF), buf.ctypes.data + lo, hi - lo) ^ np.uint32(0xFFFFFFFF)


@njit(cache=True, nogil=True)
def first_bad_v2_crc(
    buf: np.ndarray, position: np.ndarray, size: np.ndarray, magic: np.ndarray, stored: np.ndarray
) -> int:
    """Row of the first magic-2 batch whose stored CRC-32C does not match its bytes, or −1.
    Rows must be complete batches inside `buf` (what the shallow scan lists)."""
    for j in range(position.shape[0]):
        if magic[j] == 2:
            actual = crc32c_native(buf, position[j] + ATTRIBUTES_OFFSET, position[j] + size[j])
            if np.int64(actual) != stored[j]:
                return j
    return -1
