"""segpipe's own code sent to a Spark Connect server that lacks it (a serverless one, which nobody
can install into), or holds another version of it: the `pipelines` and `segment_io` packages,
zipped once per process and added to the session as a Python artifact, which Spark Connect puts
on the session's workers' path ahead of what the server has installed. A server whose workers
import the very same sources (compared by digest) is sent nothing. A shipped copy, at a new path
every session, still finds the kernels compiled for its version (segment_io.kernel caches them by
module and sources, not by path).

The third-party packages cannot travel that way (numba, pyarrow, the codecs: compiled code for the
server's platform): `check_workers` imports a job's task modules on one of the server's workers
before any work, and names any module the server's Python lacks."""

from __future__ import annotations

import io
import os
import re
import tempfile
import weakref
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pipelines
from pipelines.errors import ConfigError
from pipelines.runtime.parallelism import parallelism

PACKAGES = ("pipelines", "segment_io")


def _digest_function() -> Callable[[str], str]:
    """The digest of segpipe's sources under a directory, as a function that travels by value
    (it must run on a server that cannot import segpipe)."""

    def digest(root: str) -> str:
        import hashlib
        import os

        h = hashlib.sha256()
        for package in ("pipelines", "segment_io"):
            found = []
            for directory, _, names in os.walk(os.path.join(root, package)):
                found += [os.path.join(directory, n) for n in names if n.endswith(".py")]
            for path in sorted(found):
                with open(path, "rb") as handle:
                    h.update(os.path.relpath(path, root).encode() + b"\0" + handle.read() + b"\0")
        return h.hexdigest()[:16]

    return digest


def _root() -> Path:

    return Path(pipelines.__file__).resolve().parent.parent


@cache
def source_digest() -> str:
    return _digest_function()(str(_root()))


@cache
def package_zip() -> Path:
    """The packages' sources in one zip, named by their digest."""
    root = _root()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in PACKAGES:
            for path in sorted((root / package).rglob("*.py")):
                _add(zf, path.relative_to(root).as_posix(), path.read_bytes())
            # zipimport finds regular packages only: a directory without one gets an empty __init__.
            for directory in sorted(d for d in (root / package).rglob("*") if d.is_dir()):
                if any(directory.glob("*.py")) and not (directory / "__init__.py").exists():
                    _add(zf, (directory / "__init__.py").relative_to(root).as_posix(), b"")
    out = Path(tempfile.gettempdir()) / f"segpipe-{source_digest()}.zip"
    if not out.exists():
        partial = out.with_suffix(f".{os.getpid()}.partial")
        partial.write_bytes(buffer.getvalue())
        partial.replace(out)
    return out


def _add(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    zf.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data, zipfile.ZIP_DEFLATED)


def _on_every_worker(
    spark: Any, probe: Callable[[Iterator[Any]], Iterator[Any]], schema: str
) -> dict[str, Any]:
    """`probe` run on as many of the server's workers at once as the session has cores (each then
    starts the job's tasks with its modules imported, where one probe left the others to import
    them inside the run's first stage); their rows as one: the same sources only if every worker
    found them, every module one of them lacks. A worker that cannot even start the probe (pyarrow
    missing) is read from Spark's error."""
    from pyspark.errors import PySparkException

    tasks = parallelism(spark)
    try:
        rows = [r.asDict() for r in spark.range(0, tasks, 1, tasks).mapInArrow(probe, schema).collect()]
    except PySparkException as exc:
        found = re.search(r"No module named '([^']+)'", str(exc))
        if found is None:
            raise
        return {"missing": found.group(1)}
    missing = [m for row in rows for m in (row["missing"] or "").split(",") if m]
    return {"same": all(row["same"] for row in rows), "missing": ",".join(dict.fromkeys(missing))}


@dataclass
class _Session:
    """What segpipe knows of one session's server workers."""

    shipped: bool = False
    checked: set[str] = field(default_factory=set)  # modules they imported


# By session, held weakly: an id() could name a later session once this one is gone, which would
# then skip its check.
_sessions: weakref.WeakKeyDictionary[Any, _Session] = weakref.WeakKeyDictionary()


def _probe(modules: Sequence[str], compare: bool) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """A task for one of the server's workers: the digest of the segpipe sources it finds (without
    importing them: a worker keeps what it imported, and a copy about to be sent must win), then,
    unless `compare` finds them other than the client's, `modules` imported and the missing named."""
    digest, mine = _digest_function(), source_digest()

    def probe(batches: Iterator[Any]) -> Iterator[Any]:
        import importlib
        import importlib.util
        import os

        import pyarrow as pa

        for _ in batches:
            pass
        spec = importlib.util.find_spec("pipelines")
        found = None
        if spec is not None and spec.submodule_search_locations:
            root = os.path.dirname(next(iter(spec.submodule_search_locations)))
            found = digest(root) if os.path.isdir(os.path.join(root, "segment_io")) else None
        if compare and found != mine:
            yield pa.RecordBatch.from_pylist([{"same": False, "missing": ""}])
            return
        missing = []
        for name in modules:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as exc:
                missing.append(exc.name or name)
        yield pa.RecordBatch.from_pylist([{"same": True, "missing": ",".join(dict.fromkeys(missing))}])

    return probe


def check_workers(spark: Any, modules: Sequence[str]) -> None:
    """Before a job's first task: the server's workers run the client's own segpipe (sent as an
    artifact unless they import the very same sources already) and import the job's task
    `modules`; ConfigError naming a module they need and the server's Python lacks. One small
    job a session in the common case (the same segpipe installed), two where it is sent."""
    state = _sessions.setdefault(spark, _Session())
    wanted = [m for m in modules if m not in state.checked]
    if not wanted:
        return
    schema = "same boolean, missing string"
    row = _on_every_worker(spark, _probe(wanted, not state.shipped), schema)
    if not row.get("same", True):
        spark.addArtifacts(str(package_zip()), pyfile=True)
        state.shipped = True
        row = _on_every_worker(spark, _probe(wanted, False), schema)
    missing = [m for m in row["missing"].split(",") if m]
    if missing:
        raise ConfigError(
            f"the Spark Connect server's Python cannot import {', '.join(missing)}: segpipe sends its own "
            "code to the server, but the server's Python must have segpipe's dependencies (install them "
            "there, at the versions constraints.txt pins)"
        )
    state.checked.update(wanted)
