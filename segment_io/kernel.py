"""numba's `njit` for segpipe's kernels, their compiled code cached on disk by module and stamped
with the digest of segpipe's kernel sources.

numba names a function's cache directory after the absolute path of its source's directory, so
a copy of segpipe at another path compiles every kernel again (tens of seconds of CPU in every
process that runs them): the archive spark-submit unpacks anew for each application, the zip a
Spark Connect client sends each session, a moved install. segpipe's kernels are cached instead
under their module's name (`$NUMBA_CACHE_DIR/segpipe/segment_io.format.records/`).

numba stamps an entry with its own source file only, yet a kernel inlines other modules' kernels
and folds other modules' constants into its code: an entry would outlive a change there. Here the
stamp is the digest of every module of segment_io (what the kernels are built from) and of every
module of pipelines that declares kernels, which imports no other module of pipelines
(tests/unit/test_kernel_cache.py holds it to that). A copy takes an entry only where all of those
are the same, wherever it lies; a change to any of them compiles every kernel again, once.

NUMBA_CACHE_DIR defaults to ~/.cache/segpipe-numba; numba reads it once, when it is first
imported. Every kernel module imports `njit` from here, so these locators are numba's first choice
before any kernel is declared; functions of other packages are cached as numba always does.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from collections.abc import Iterable
from functools import cache
from typing import Any, TypeVar

DEFAULT_CACHE_DIR = os.path.join(os.path.expanduser("~"), ".cache", "segpipe-numba")
os.environ.setdefault("NUMBA_CACHE_DIR", DEFAULT_CACHE_DIR)

from numba import njit  # noqa: E402  # re-exported; numba reads NUMBA_CACHE_DIR as it loads
from numba.core import caching, config  # noqa: E402

__all__ = ["ModuleCacheLocator", "ModuleZipCacheLocator", "kernel_sources_digest", "njit"]

PACKAGES = ("segment_io", "pipelines")


def _ours(py_func: Any) -> bool:
    return str(getattr(py_func, "__module__", "")).split(".")[0] in PACKAGES


def _module_cache_path(py_func: Any) -> str:
    base = getattr(config, "CACHE_DIR", "") or DEFAULT_CACHE_DIR  # numba loaded before this module
    return os.path.join(base, "segpipe", str(py_func.__module__))


# A module of pipelines that declares kernels says so with this import.
KERNEL_IMPORT = b"from segment_io.kernel import"


def kernel_sources_digest(files: Iterable[tuple[str, bytes]]) -> str:
    """The stamp of every kernel: the digest of the kernel sources among `files` (paths relative
    to the packages' root, with their bytes). Empty files (a zip's made-up `__init__.py`) hold no
    code and count for nothing."""
    digest = hashlib.sha256()
    for name, data in sorted(files):
        if data and (name.startswith("segment_io/") or KERNEL_IMPORT in data):
            digest.update(name.encode() + b"\0" + data + b"\0")
    return digest.hexdigest()


@cache
def _tree_digest(root: str) -> str:
    """The kernel sources' digest of the copy under `root` (read once per process)."""
    files = []
    for package in PACKAGES:
        for directory, _, names in os.walk(os.path.join(root, package)):
            for name in names:
                if name.endswith(".py"):
                    path = os.path.join(directory, name)
                    with open(path, "rb") as handle:
                        files.append((os.path.relpath(path, root).replace(os.sep, "/"), handle.read()))
    return kernel_sources_digest(files)


@cache
def _zip_digest(zip_path: str, mtime_ns: int, size: int) -> str:
    with zipfile.ZipFile(zip_path) as archive:
        names = [n for n in archive.namelist() if n.endswith(".py") and n.split("/")[0] in PACKAGES]
        return kernel_sources_digest((n, archive.read(n)) for n in names)


def _root(py_func: Any, py_file: str) -> str | None:
    """The directory the packages of `py_file`'s copy are in (None where the path does not end
    with the module's own)."""
    relative = os.path.join(*str(py_func.__module__).split(".")) + ".py"
    return py_file[: -len(relative)] if py_file.endswith(os.sep + relative) else None


L = TypeVar("L", bound=caching._CacheLocator)


def _writable(located: L) -> L | None:
    """The locator if its directory can be made and written to; else None (numba's own decide)."""
    try:
        located.ensure_cache_path()
    except OSError:
        return None
    return located


class ModuleCacheLocator(caching.UserProvidedCacheLocator):
    """A segpipe kernel in a source file: cached under its module's name, stamped with the digest
    of its copy's kernel sources."""

    def __init__(self, py_func: Any, py_file: str, root: str = "") -> None:
        super().__init__(py_func, py_file)
        self._cache_path = _module_cache_path(py_func)
        self._root = root

    def get_source_stamp(self) -> str:
        return _tree_digest(self._root)

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> ModuleCacheLocator | None:
        root = _root(py_func, py_file) if _ours(py_func) and os.path.isfile(py_file) else None
        return None if root is None else _writable(cls(py_func, py_file, root))


class ModuleZipCacheLocator(caching.ZipCacheLocator):
    """A segpipe kernel in a zip (the copy a Spark Connect client sends): the same place and
    stamp as the file it was zipped from."""

    def __init__(self, py_func: Any, py_file: str) -> None:
        super().__init__(py_func, py_file)
        self._cache_path = _module_cache_path(py_func)

    def get_source_stamp(self) -> str:
        st = os.stat(self._zip_path)
        return _zip_digest(self._zip_path, st.st_mtime_ns, st.st_size)

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> ModuleZipCacheLocator | None:
        if not _ours(py_func) or ".zip" + os.sep not in py_file:
            return None
        return _writable(cls(py_func, py_file))


# numba asks its locators in order, for every function declared with cache=True.
_LOCATORS = caching.CacheImpl._locator_classes
if ModuleCacheLocator not in _LOCATORS:
    _LOCATORS[:0] = [ModuleCacheLocator, ModuleZipCacheLocator]
