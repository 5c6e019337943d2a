"""The driver JVM's class-data archive: the Spark classes a `clean` run loads, stored once so
later JVMs map them instead of loading and verifying each one again (seconds of start-up).

`python -m pipelines.class_archive` (run by scripts/bootstrap) builds it for this install by
running `clean` on a small generated log directory with the JVM told to archive at exit.
`session.get_context` uses it when present; a stale or foreign archive is ignored by the JVM.
Set SEGPIPE_CLASS_ARCHIVE to use another file, or to an empty value to use none.
"""

from __future__ import annotations

import os
import sys
import tempfile
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


def build(path: Path) -> None:
    """Run a small `clean` with the JVM archiving the classes it loaded; publish the archive
    only once the JVM has exited (it writes the file on its way out)."""
    from pipelines.cleaner import clean
    from pipelines.config import JobConfig
    from pipelines.session import get_context
    from segment_io.generate import generate_log_dir
    from segment_io.storage import open_storage

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        storage, src = open_storage(str(Path(tmp) / "src"))
        generate_log_dir(storage, src)
        sc = get_context(
            "local[2]", **{"spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={partial} {QUIET}"}
        )
        jvm = sc._gateway.proc
        try:
            clean(sc, src, str(Path(tmp) / "dst"), JobConfig.build({"cleanup.policy": "compact,delete"}),
                  now_ms=1_700_700_000_000, log=lambda *_: None)  # fmt: skip
        finally:
            sc.stop()
            jvm.stdin.close()  # the gateway JVM exits when its stdin closes
            status = jvm.wait(timeout=300)
    if status != 0 or not partial.is_file():  # a failed dump may leave a partial file behind
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"the JVM exited with {status} and wrote no complete class archive")
    partial.replace(path)


def main() -> int:
    path = archive_path()
    if path is None:
        print(f"{ENV} is empty: no class archive")
        return 0
    build(path)
    print(f"class archive: {path} ({path.stat().st_size / 2**20:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
