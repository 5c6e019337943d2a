"""segpipe's own code sent to a Spark Connect server that lacks it (a serverless one, which nobody
can install into), or holds another version of it: the `pipelines` and `segment_io` packages,
zipped once per process and added to the session as a Python artifact, which Spark Connect puts
on the session's workers' path ahead of what the server has installed. A server whose workers
import the very same sources (compared by digest) is sent nothing: its installed copy keeps its
compiled-kernel cache, which a shipped copy, at a new path every session, cannot reuse.

The third-party packages cannot travel that way (numba, pyarrow, the codecs: compiled code for the
server's platform): `check_workers` imports a job's task modules on one of the server's workers
before any work, and names any module the server's Python lacks."""

from __future__ import annotations

import io
import os
import re
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from pipelines.errors import ConfigError

PACKAGES = ("pipelines", "segment_io")
_checked: dict[int, set[str]] = {}  # per session: the modules its server's workers imported


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
    import pipelines

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


def _one_row(spark: Any, probe: Callable[[Iterator[Any]], Iterator[Any]], schema: str) -> dict[str, Any]:
    """`probe` run once on one of the server's workers; its one row. A worker that cannot even
    start the probe (pyarrow missing) is read from Spark's error."""
    from pyspark.errors import PySparkException

    try:
        return dict(spark.range(1).mapInArrow(probe, schema).collect()[0].asDict())
    except PySparkException as exc:
        found = re.search(r"No module named '([^']+)'", str(exc))
        if found is None:
            raise
        return {"missing": found.group(1)}


def ship_package(spark: Any) -> None:
    """Send segpipe's sources to the session's server unless its workers import the same ones."""
    digest = _digest_function()

    def installed(batches: Iterator[Any]) -> Iterator[Any]:
        import importlib.util
        import os

        import pyarrow as pa

        spec = importlib.util.find_spec("pipelines")
        found = None
        if spec is not None and spec.submodule_search_locations:
            root = os.path.dirname(next(iter(spec.submodule_search_locations)))
            found = digest(root) if os.path.isdir(os.path.join(root, "segment_io")) else None
        for _ in batches:
            pass
        yield pa.RecordBatch.from_pylist([{"digest": found, "missing": ""}])

    if _one_row(spark, installed, "digest string, missing string").get("digest") != source_digest():
        spark.addArtifacts(str(package_zip()), pyfile=True)


def check_workers(spark: Any, modules: Sequence[str]) -> None:
    """The job's task `modules` imported on one of the server's workers (once a session);
    ConfigError naming what they need and the server's Python lacks."""
    checked = _checked.setdefault(id(spark), set())
    wanted = [m for m in modules if m not in checked]
    if not wanted:
        return

    def imports(batches: Iterator[Any]) -> Iterator[Any]:
        import importlib

        import pyarrow as pa

        missing = []
        for name in wanted:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as exc:
                missing.append(exc.name or name)
        for _ in batches:
            pass
        yield pa.RecordBatch.from_pylist([{"missing": ",".join(dict.fromkeys(missing))}])

    missing = [m for m in _one_row(spark, imports, "missing string")["missing"].split(",") if m]
    if missing:
        raise ConfigError(
            f"the Spark Connect server's Python cannot import {', '.join(missing)}: segpipe sends its own "
            "code to the server, but the server's Python must have segpipe's dependencies (install them "
            "there, at the versions constraints.txt pins)"
        )
    checked.update(wanted)
