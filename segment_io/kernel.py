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

Processes that find no entry for a kernel at once (a local master's workers, the test suite's
processes, a cold cache) would each compile it, tens of seconds of CPU each: a kernel is
compiled by one process at a time (a lock file beside its cache entry), and a process that
waited loads what the other one saved.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from typing import Any, TypeVar

DEFAULT_CACHE_DIR = os.path.join(os.path.expanduser("~"), ".cache", "segpipe-numba")
os.environ.setdefault("NUMBA_CACHE_DIR", DEFAULT_CACHE_DIR)

import numba  # noqa: E402  # numba reads NUMBA_CACHE_DIR as it loads
from numba.core import caching, config  # noqa: E402
from numba.core.compiler_lock import global_compiler_lock  # noqa: E402

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


# A process waits this long for another one's compilation of a kernel, then compiles it itself.
COMPILE_WAIT_S = 300.0
# The compile locks this process holds (lock file -> nesting depth), under numba's compiler lock.
_held: dict[str, int] = {}


@contextlib.contextmanager
def _compile_lock(path: str) -> Iterator[None]:
    """Hold the lock file `path` (re-entrant: numba compiles a kernel again inside its own
    compilation for literal arguments). Kernels that call kernels take the callees' locks inside
    the callers', always along the call graph, which has no cycles: no two processes can wait on
    each other. A lock that cannot be had (a read-only cache, a compilation that hangs) is given
    up after COMPILE_WAIT_S: the worst case is a kernel compiled twice, as it was without it."""
    if path in _held:
        _held[path] += 1
        try:
            yield
        finally:
            _held[path] -= 1
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        deadline = time.monotonic() + COMPILE_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)  # bounded by the deadline
            except OSError:  # a file system without locks: compile unlocked
                break
        _held[path] = 1
        try:
            yield
        finally:
            del _held[path]
    finally:
        os.close(fd)  # releases the lock


def _compiled_once(dispatcher: Any) -> Any:
    """A kernel whose compilations (a cache miss) run under its lock file, so that a process
    that finds no entry waits for one that is compiling it, then loads the entry it saved."""
    # numba's FunctionCache keeps its index file's path here (None: caching off, or no locator).
    index = getattr(getattr(getattr(dispatcher, "_cache", None), "_cache_file", None), "_index_path", None)
    if not (index and _ours(dispatcher.py_func)):
        return dispatcher
    lock = index + ".lock"
    compile_any = dispatcher.compile

    def compile_locked(sig: Any) -> Any:
        # numba's own lock first (as its compile takes it): one thread of this process at a time
        # gets here, so a lock this process holds is held by the calling thread.
        with global_compiler_lock, _compile_lock(lock):
            return compile_any(sig)

    dispatcher.compile = compile_locked
    return dispatcher


def njit(*args: Any, **options: Any) -> Any:
    """numba's `njit` (as `@njit(...)` or `@njit`) for segpipe's kernels, each compiled by one
    process at a time."""
    if len(args) == 1 and callable(args[0]) and not options:
        return _compiled_once(numba.njit(args[0]))
    decorate: Callable[[Any], Any] = numba.njit(*args, **options)
    return lambda function: _compiled_once(decorate(function))
