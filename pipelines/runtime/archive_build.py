"""Builds the driver JVM's class-data archive (runtime/class_archive.py) for this install by
running a small workload with the JVM told to archive at exit. segpipe's jobs run as a few
DataFrame operations (runtime.dataflow: Arrow map tasks, hash repartitioning, collecting), so the
workload touches what they touch without knowing any job. Run by scripts/bootstrap; nothing of
the runtime imports it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pipelines.runtime import dataflow
from pipelines.runtime.class_archive import ENV, QUIET, archive_path
from pipelines.runtime.session import get_spark


def _workload(spark: Any) -> None:
    """The operations segpipe's jobs use (runtime.dataflow), through Python workers."""
    frame = dataflow.each(
        spark, [[i, i + 1] for i in range(0, 64, 2)], lambda pack: ((x % 8, x) for x in pack)
    )
    summed = dataflow.routed(frame, 8, lambda part, items: [(part % 2, part + sum(items))])
    halves = dataflow.routed(summed, 2, lambda part, items: [(0, sum(items))])
    assert sum(total for _, total in dataflow.collected(halves)) > 0


def build(path: Path) -> None:
    """Run the workload with the JVM archiving the classes it loaded; publish the archive only
    once the JVM has exited (it writes the file on its way out)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    spark = get_spark(
        "local[2]",
        sources=False,
        **{"spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={partial} {QUIET}"},
    )
    sc = spark.sparkContext
    jvm = sc._gateway.proc
    try:
        _workload(spark)
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
