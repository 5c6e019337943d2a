"""C functions that installed packages already ship, callable from numba kernels.

A kernel refers to such a function by a registered symbol name rather than by address, so numba's
on-disk cache stays valid in every process. Where a library or symbol is missing, a stand-in
returning a fixed failure value is registered instead; callers learn which is which.
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
from typing import Any

from llvmlite import binding as llvm
from numba import types


def package_library(package: str, pattern: str) -> ctypes.CDLL | None:
    """A shared library inside an installed package (already a Python extension of it)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        for path in sorted(glob.glob(os.path.join(location, pattern))):
            try:
                return ctypes.CDLL(path)
            except OSError:
                continue
    return None


def _address(lib: ctypes.CDLL | None, name: str) -> int | None:
    function = getattr(lib, name, None) if lib is not None else None
    return ctypes.cast(function, ctypes.c_void_p).value if function is not None else None


_C_TYPES = {types.int32: ctypes.c_int, types.uint32: ctypes.c_uint32, types.uintp: ctypes.c_size_t}
_stand_ins: list[Any] = []  # ctypes callbacks must stay alive while kernels may link to them


def native(lib: ctypes.CDLL | None, symbol: str, signature: Any, failure: int) -> tuple[Any, bool]:
    """A numba-callable function bound to `symbol` in `lib`, and whether it is there; where it
    is not, a stand-in that returns `failure`."""
    address = _address(lib, symbol)
    present = address is not None
    if not present:
        c_types = [_C_TYPES[t] for t in (signature.return_type, *signature.args)]
        _stand_ins.append(ctypes.CFUNCTYPE(*c_types)(lambda *_: failure))
        address = ctypes.cast(_stand_ins[-1], ctypes.c_void_p).value
    llvm.add_symbol(f"segpipe_{symbol}", address)
    return types.ExternalFunction(f"segpipe_{symbol}", signature), present
