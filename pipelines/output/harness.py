"""What every job's run shares, set up in one place: its Spark (a LazySpark, started only where a
stage needs it, with the job's worker modules preloaded and its stages' jobs grouped for the
progress line), its `now` (read once from the injected clock), its stage timer, typed errors
out of Spark tasks, and a staged output that is published whole or removed whole.

    request = checked(request)  # its refusals, unless the caller ran them (preflight)
    with job_run(spark, WORKER_MODULES, request.now_ms) as run:
        with run.timer.stage("scan"): ...
        with staged_output(run, dst, log) as staging:
            ...  # the job's work, its report (staging.write_meta), its gate
            publish(staging, manifest, records_out)  # the one door: every job's output leaves by it
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from pipelines.clock import clock_ms
from pipelines.output.inventory import INVENTORY, inventory
from pipelines.output.report import StageTimer
from pipelines.output.staging import Staging, clear_leftovers
from pipelines.runtime import progress
from pipelines.runtime.faults import fault_point
from pipelines.runtime.remote_errors import typed_errors
from pipelines.runtime.session import LazySpark, preload_in_workers
from pipelines.runtime.spark_handle import Spark
from pipelines.runtime.stop import held, publishing, raise_if_stopped, settle
from segment_io.layout import list_log_dir
from segment_io.storage import Place


class Refusable(Protocol):
    def refusals(self) -> None:
        """Raise the typed error that refuses this request before anything runs, if any."""


R = TypeVar("R", bound=Refusable)


@dataclass(frozen=True)
class Checked(Generic[R]):
    """A request whose refusals have run (`preflight`): its run does not run them again."""

    request: R


def preflight(request: R, refusals: Callable[[], object] | None = None) -> Checked[R]:
    """Run `request`'s refusals now (a command line, before Spark starts) and mark it checked; a
    Checked request comes only from here. `refusals`: the ones that apply instead of the
    request's own, where a run stages by design inside what it reads (an in-place run's staging
    in its tier: the tier's refusals, and a staging free of another run's output)."""
    if refusals is None:
        request.refusals()
    else:
        refusals()
    return Checked(request)


def rechecked(request: Checked[R], **changes: Any) -> Checked[R]:
    """A checked request with fields its refusals do not judge changed (the key list it read
    since): still checked."""
    from dataclasses import replace

    return Checked(replace(request.request, **changes))  # type: ignore[type-var]


def checked(request: R | Checked[R]) -> R:
    """The request a job runs: its refusals run here, unless `preflight` ran them."""
    if isinstance(request, Checked):
        return request.request
    request.refusals()
    return request


@dataclass(frozen=True)
class JobRun:
    """One run of a job: its Spark, its `now` (epoch ms) and its stage timer."""

    spark: LazySpark
    now: int
    timer: StageTimer


@contextmanager
def job_run(
    spark: Spark, workers: Sequence[str], now_ms: int | None = None, clock: Callable[[], int] = clock_ms
) -> Iterator[JobRun]:
    """A job's run over `spark` (a session, a context or a LazySpark): `now` is `now_ms` or the
    clock's time at the start; `workers` are the modules its Python workers preload; an error a
    Spark task raised leaves as the typed segpipe error it was."""
    with typed_errors():
        lazy = LazySpark.of(spark)
        timer = StageTimer(
            on_enter=lambda name: progress.enter(lazy.session() if lazy.started else None, name),
            on_leave=progress.leave,
        )
        lazy.on_start(lambda session: preload_in_workers(session, workers))
        lazy.on_start(progress.join)
        yield JobRun(lazy, clock() if now_ms is None else now_ms, timer)
        # A stop whose cancelled job's error a library swallowed ends the run here: what the job
        # returns is not its result.
        raise_if_stopped()


@contextmanager
def staged_output(run: JobRun, dst: Place, log: Callable[[str], Any] = print) -> Iterator[Staging]:
    """A run's output staged for `dst` (what dead runs left there removed first) and published by
    the block: on any error or stop inside it, no task of the run writes into the staging any
    more (cancelled and waited for), and the staging is removed; the destination is left as it
    was. A stop while the staging is made waits until it is in the block's care, so no stop
    leaves one behind."""
    clear_leftovers(dst, log)
    staging: Staging | None = None
    try:
        with held("staging the output"):
            staging = Staging.make(dst)
        yield staging
    except BaseException:
        if staging is None or staging.published:  # none made, or a stop held during the publication
            raise
        if run.spark.started:
            settle(run.spark)
        staging.abort()
        raise


def publish(staging: Staging, manifest: dict[str, Any], records_out: Mapping[str, int] | None = None) -> None:
    """The one door a staged output leaves by: the manifest, with the inventory of what was written
    (each partition's files, and its records where `records_out` gives them), written last; then
    the publication, which a stop signal never cuts in half (it is held until the output is
    visible, and then stops the run); the fault points on either side of it."""
    if records_out is not None:
        written = list_log_dir(staging.storage, staging.path, allow_incomplete=True)
        manifest = {**manifest, INVENTORY: inventory(written, dict(records_out))}
    fault_point("before-publish")
    with publishing(staging.storage.url(staging.final_path)):
        staging.publish(manifest)
    fault_point("after-publish")
