"""The Spark of one command-line run: started while the job's modules import, warmed up, stopped
by Ctrl-C or SIGTERM as a run is, and stopped before the process exits."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from pipelines.runtime.session import get_spark
from pipelines.runtime.stop import interrupt_cancels_jobs, stop_before_exit
from pipelines.runtime.warm_up import warm_up


@contextmanager
def spark_for_command(
    job_modules: Sequence[str],
    master: str | None,
    settings: dict[str, str],
    log_level: str = "warn",
    remote: str | None = None,
) -> Iterator[Any]:
    """The SparkSession of one command-line run (classic, or Spark Connect where a remote is
    named): Spark starts (seconds) while this thread imports the job's modules; Ctrl-C cancels
    running jobs; Spark stops before the process ends."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")  # read when great-expectations loads
    with ThreadPoolExecutor(1) as pool:
        starting = pool.submit(get_spark, master, "segpipe", False, remote, log_level, **settings)
        modules = [importlib.import_module(module) for module in job_modules]
        spark = starting.result()
    interrupt_cancels_jobs(spark)
    warming = warm_up(spark, [w for m in modules for w in getattr(m, "WORKER_MODULES", ())])
    try:
        yield spark
    finally:
        warming.stop()
        stop_before_exit(spark)
