"""A stop cancels the run's Spark jobs, and every job the run starts after it: a library that
swallowed the first cancelled job's error and went on (great-expectations judging its next rule)
finds each later job cancelled too, until the run ends."""

from __future__ import annotations

import signal
import time

import pytest

from pipelines.runtime import stop
from pipelines.runtime.stop import interrupt_cancels_jobs

pytestmark = pytest.mark.spark


def test_every_job_started_after_a_stop_is_cancelled_until_the_run_ends(spark) -> None:  # type: ignore[no-untyped-def]
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    slow = spark.sparkContext.parallelize(range(2), 2).map(lambda x: time.sleep(30) or x)  # type: ignore[func-returns-value]
    try:
        interrupt_cancels_jobs(spark)
        code = "try:\n    signal.raise_signal(signal.SIGTERM)\nexcept BaseException:\n    pass\n"
        exec(
            compile(code, "py4j/java_gateway.py", "exec"), {"__name__": "py4j.java_gateway", "signal": signal}
        )
        assert stop.stopped_by() == signal.SIGTERM
        for _ in range(2):  # each a job started after the stop, as a library going on would start
            with pytest.raises(Exception, match="cancel"):  # run to its end, it would count 2
                slow.count()
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])
        stop.begin_run()  # a new run: nothing cancels its jobs
    time.sleep(2 * stop.CANCEL_EVERY_S)
    assert spark.sparkContext.parallelize(range(4), 2).count() == 4
