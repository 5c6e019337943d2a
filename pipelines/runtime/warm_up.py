"""The warm-up job: Python workers started and Spark's SQL engine loaded beside the driver's own
first work, so that a run's first job does not pay for them."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from pipelines.runtime.connect import is_connect
from pipelines.runtime.parallelism import parallelism
from pipelines.runtime.session import preload_in_workers

WARM_UP_GROUP = "segpipe-warm-up"


class _WarmUp:
    """A small job run beside the driver's own first work (the scan and plan of a run): a run's
    first Spark job otherwise pays for starting the Python workers (importing the job's worker
    modules) and for loading Spark's SQL engine, measured at 2.8 s on 2 cores, before it does
    any work. Its failure changes nothing: the run's own jobs start what they need."""

    def __init__(self, spark: Any, workers: Sequence[str]) -> None:
        import threading

        self._spark = spark
        self._thread = threading.Thread(
            target=self._run, args=(workers,), name="segpipe-warm-up", daemon=True
        )
        self._thread.start()

    def _run(self, workers: Sequence[str]) -> None:
        from pipelines.runtime import dataflow

        with contextlib.suppress(Exception):
            if is_connect(self._spark):
                self._spark.addTag(WARM_UP_GROUP)
            else:
                preload_in_workers(self._spark, workers)
                self._spark.sparkContext.setJobGroup(WARM_UP_GROUP, "segpipe: starting Python workers")
            tasks = list(range(parallelism(self._spark)))
            mapped = dataflow.each(self._spark, tasks, lambda task: [(task % 2, task)])
            dataflow.collected(dataflow.routed(mapped, 2, lambda part, tasks: [(part, sum(tasks))]))

    def stop(self, timeout_s: float = 10.0) -> None:
        """Cancel it if it still runs (a run that ended first), and let it end (bounded)."""
        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                if is_connect(self._spark):
                    self._spark.interruptTag(WARM_UP_GROUP)
                else:
                    self._spark.sparkContext.cancelJobGroup(WARM_UP_GROUP)
            self._thread.join(timeout_s)


def warm_up(spark: Any, workers: Sequence[str]) -> _WarmUp:
    """Start the warm-up job (`workers`: the modules the run's tasks preload, see
    preload_in_workers) in a thread of its own."""
    return _WarmUp(spark, workers)
