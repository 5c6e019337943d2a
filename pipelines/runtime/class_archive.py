"""The driver JVM's class-data archive: the Spark classes segpipe's jobs load, stored once so
later JVMs map them instead of loading and verifying each one again (seconds of start-up).

`python -m pipelines.runtime.archive_build` (run by scripts/bootstrap) builds it for this
install. `session.get_context` uses it when present; a stale or foreign archive is ignored by the
JVM. Set SEGPIPE_CLASS_ARCHIVE to use another file, or to an empty value to use none. This module
imports nothing of the runtime's, so the session can import it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ENV = "SEGPIPE_CLASS_ARCHIVE"
# A foreign or stale archive only costs the speed-up: the JVM would say so on stdout.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def archive_path() -> Path | None:
    """Where this install's archive is (or would be); None when disabled."""
    configured = os.environ.get(ENV)
    if configured is not None:
        return Path(configured) if configured else None
    import pyspark

    return Path(sys.prefix) / "share" / "segpipe" / f"spark-{pyspark.__version__}.jsa"


def java_options() -> str | None:
    """Driver JVM options that map the archive, when it exists."""
    path = archive_path()
    if path is None or not path.is_file():
        return None
    return f"-XX:SharedArchiveFile={path} {QUIET}"
