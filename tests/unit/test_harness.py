"""The harness every job runs in: `now` from the injected clock, Spark started only when a stage
asks for it (then with the job's worker modules), typed errors out of Spark tasks, and a staged
output published whole or removed whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipelines.output.harness import job_run, staged_output
from pipelines.runtime.session import LazySpark, preload_in_workers
from pipelines.runtime.worker_daemon import PRELOAD_ENV
from segment_io.errors import CorruptBatch
from segment_io.storage import loaded_clients

pytestmark = pytest.mark.unit


class Context:
    """What a run's set-up asks of a classic session at its start: the workers' environment."""

    def __init__(self) -> None:
        self.environment: dict[str, str] = {}

    def setJobGroup(self, group: str, description: str) -> None:
        self.group = group


class Session:
    def __init__(self) -> None:
        self.sparkContext = Context()

    def sql(self, text: str) -> Any:  # a SparkSession, not a context, to LazySpark
        raise AssertionError("no query is run")


def test_now_comes_from_the_clock_once_and_spark_starts_only_when_asked(tmp_path: Path) -> None:
    started: list[Session] = []

    def start() -> Session:
        started.append(Session())
        return started[-1]

    ticks = iter([1_700_000_000_000, 1_800_000_000_000])
    with job_run(LazySpark(start), ["pipelines.output.copy"], clock=lambda: next(ticks)) as run:
        assert run.now == 1_700_000_000_000 and not started
        with run.timer.stage("scan"):
            pass
        run.spark.session()
    assert len(started) == 1
    # the job's modules, then the object-store clients this process has loaded (its tasks open the same stores)
    assert started[0].sparkContext.environment[PRELOAD_ENV].split(",") == [
        "pipelines.output.copy",
        *loaded_clients(),
    ]
    with job_run(LazySpark(start), [], now_ms=5) as run:
        assert run.now == 5 and len(started) == 1 and set(run.timer.seconds) == set()


def test_a_sessions_preload_list_only_grows_so_jobs_that_follow_share_its_workers() -> None:
    """Spark keeps a worker daemon per worker environment: a job whose modules are preloaded
    already leaves the list as it is (the same daemon); one with a new module appends it."""
    session = Session()
    clients = loaded_clients()
    preload_in_workers(session, ["pipelines.log.scan", "pipelines.output.copy"])
    first = session.sparkContext.environment[PRELOAD_ENV]
    assert first.split(",") == ["pipelines.log.scan", "pipelines.output.copy", *clients]
    preload_in_workers(session, ["pipelines.output.copy"])
    assert session.sparkContext.environment[PRELOAD_ENV] == first
    preload_in_workers(session, ["pipelines.jobs.validate.checks", "pipelines.log.scan"])
    assert session.sparkContext.environment[PRELOAD_ENV].split(",") == [
        *first.split(","),
        "pipelines.jobs.validate.checks",
    ]


def test_an_error_a_spark_task_raised_leaves_as_its_typed_error() -> None:
    failed = RuntimeError(
        "Job aborted ... segment_io.errors.CorruptBatch: corrupt batch: /x/0.log at byte 61: CRC mismatch\n"
    )
    with pytest.raises(CorruptBatch, match="CRC mismatch"), job_run(LazySpark(Session), []):
        raise failed


def test_a_staged_output_is_removed_whole_on_an_error_and_published_otherwise(tmp_path: Path) -> None:
    dst = tmp_path / "out"
    with (
        pytest.raises(KeyboardInterrupt),
        job_run(LazySpark(Session), []) as run,
        staged_output(run, str(dst), log=lambda _: None) as staging,
    ):
        (Path(staging.path) / "orders-0").mkdir()
        raise KeyboardInterrupt  # a stop in the middle of the run
    assert list(tmp_path.iterdir()) == []
    with (
        job_run(LazySpark(Session), []) as run,
        staged_output(run, str(dst), log=lambda _: None) as staging,
    ):
        (Path(staging.path) / "orders-0").mkdir()
        staging.publish({"run_id": staging.run_id})
    assert (dst / "orders-0").is_dir() and [p.name for p in tmp_path.iterdir()] == ["out"]


@pytest.mark.parametrize("after", ["makedirs", "write_atomic"])
def test_a_stop_while_the_staging_is_made_leaves_nothing(
    after: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM arriving the moment the staging directory exists, or its lock is written, ends the
    run with Terminated, and the staging is removed: nothing is left for the next run to clear."""
    import os
    import signal

    from pipelines.errors import Terminated
    from pipelines.runtime import stop
    from segment_io.storage.local import LocalStorage

    real = getattr(LocalStorage, after)

    def then_stop(self: LocalStorage, *args: Any) -> None:
        real(self, *args)
        os.kill(os.getpid(), signal.SIGTERM)  # handled before the next line of Python runs

    saved = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        stop.interrupt_cancels_jobs(LazySpark(lambda: None))
        monkeypatch.setattr(LocalStorage, after, then_stop)
        with (
            pytest.raises(Terminated),
            job_run(LazySpark(Session), []) as run,
            staged_output(run, str(tmp_path / "out"), log=lambda _: None),
        ):
            raise AssertionError("the block is never entered: the stop came first")
    finally:
        signal.signal(signal.SIGINT, saved[0])
        signal.signal(signal.SIGTERM, saved[1])
        stop.begin_run()
    assert list(tmp_path.iterdir()) == []
