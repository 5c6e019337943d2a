"""Growable numpy buffers shared by the readers and the key map."""

from __future__ import annotations

import numpy as np


def grow(array: np.ndarray, size: int, keep: int, zero: bool = False) -> np.ndarray:
    """`array` if it holds `size` items, else a larger one (at least 1.5×, so repeated growth
    stays linear) holding its first `keep` items; `zero` clears the rest."""
    if len(array) >= size:
        return array
    grown = (np.zeros if zero else np.empty)(max(size, len(array) * 3 // 2), dtype=array.dtype)
    grown[:keep] = array[:keep]
    return grown
