"""Importing this module loads numba's compiler back end (LLVM; about a third of a second), so
that processes forked after the import find it loaded (runtime.worker_daemon, local_workers)."""

from __future__ import annotations

import numpy as np

from segment_io.kernel import njit


def _sum(values: np.ndarray) -> int:
    return int(values.sum())


njit(cache=True, nogil=True)(_sum)(np.ones(1, dtype=np.int64))
