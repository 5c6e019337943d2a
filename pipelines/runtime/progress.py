"""Progress of a long run from Spark's status tracker (on Spark Connect, from the progress the
server reports with each operation): on a terminal one live line for the stage
under way (tasks done of all its tasks, MB processed and MB/s, elapsed time, an estimate of the
rest), elsewhere a plain line every half minute. A job names its stages (`enter`); the bytes a
stage reads are added as its tasks are packed (`runtime.tasks.spark_packs` calls `add_bytes`); the
reporter only reads.

MB processed is the stage's bytes times the share of its tasks done: tasks are packed to about
equal bytes, so the share is a fair measure, and the line says "about"."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from segment_io.format.constants import MB

PLAIN_EVERY_S = 30.0  # not a terminal: one line this often (schedulers' logs stay short)
LIVE_EVERY_S = 0.5


@dataclass
class _Stage:
    name: str
    group: str
    started: float
    size_bytes: int = 0  # what the stage reads, when the job said (`add_bytes`)


_current: list[_Stage] = []  # the stage under way, set by the job's thread, read by the reporter


def enter(spark: Any, name: str, clock: Callable[[], float] = time.monotonic) -> None:
    """The job's stage `name` starts: its Spark jobs are grouped under it (`spark`: a session,
    or None while a run's Spark has not started; `join` then groups them once it has)."""
    group = f"segpipe-{name}"
    _current[:] = [_Stage(name, group, clock())]
    _operations.clear()
    if spark is not None:
        join(spark)


def join(spark: Any) -> None:
    """Group the Spark jobs of this thread under the stage under way (if one is): a job group
    of the context, or on Spark Connect the session's one tag."""
    if not _current:
        return
    if hasattr(spark, "addTag") and not hasattr(spark, "sparkContext"):  # Spark Connect
        spark.clearTags()
        spark.addTag(_current[0].group)
    else:
        getattr(spark, "sparkContext", spark).setJobGroup(_current[0].group, f"segpipe {_current[0].name}")


def add_bytes(size_bytes: int) -> None:
    """The stage under way reads `size_bytes` more (said as its tasks are made)."""
    if _current:
        _current[0].size_bytes += size_bytes


def leave() -> None:
    _current.clear()


# Spark Connect reports progress per operation; those of the stage under way, by operation id:
# (tasks done, tasks in all).
_operations: dict[str, tuple[int, int]] = {}


class ConnectProgress:
    """A Spark Connect progress handler: what each operation of the stage under way has done."""

    def __call__(self, stages: Any, inflight_tasks: int, operation_id: str | None, done: bool) -> None:
        if stages is not None and operation_id is not None and _current:
            stages = list(stages)
            _operations[operation_id] = (
                sum(s.num_completed_tasks for s in stages),
                sum(s.num_tasks for s in stages),
            )


def counter(spark: Any) -> Callable[[str], tuple[int, int]]:
    """(tasks done, tasks in all) of a stage group, as `spark` tells them."""
    if hasattr(spark, "registerProgressHandler") and not hasattr(spark, "sparkContext"):
        spark.registerProgressHandler(ConnectProgress())
        return lambda group: (
            sum(d for d, _ in _operations.values()),
            sum(t for _, t in _operations.values()),
        )
    tracker = getattr(spark, "sparkContext", spark).statusTracker()
    return lambda group: tasks_of(tracker, group)


def tasks_of(tracker: Any, group: str) -> tuple[int, int]:
    """(tasks done, tasks in all) of every stage of every job in `group`."""
    done = total = 0
    for job in tracker.getJobIdsForGroup(group) or []:
        info = tracker.getJobInfo(job)
        for stage_id in info.stageIds if info is not None else []:
            stage = tracker.getStageInfo(stage_id)
            if stage is not None:
                done += stage.numCompletedTasks
                total += stage.numTasks
    return done, total


def progress_line(stage: _Stage, done: int, total: int, now: float) -> str:
    elapsed = now - stage.started
    head = f"segpipe: {stage.name}: "
    if total == 0:
        return f"{head}{elapsed:,.0f} s"
    eta = f", about {elapsed * (total - done) / done:,.0f} s to go" if 0 < done < total else ""
    volume = ""
    if stage.size_bytes:
        mb = stage.size_bytes / MB * done / total
        rate = f", {mb / elapsed:,.0f} MB/s" if elapsed > 0 else ""
        volume = f", about {mb:,.0f}/{stage.size_bytes / MB:,.0f} MB{rate}"
    return f"{head}{done:,}/{total:,} tasks{volume}, {elapsed:,.0f} s{eta}"


@dataclass
class Reporter:
    """Writes progress to `stream` until `stop()`; live (one rewritten line) when `live`.
    `counts(group)`: (tasks done, tasks in all) of a stage group (`counter`)."""

    counts: Callable[[str], tuple[int, int]]
    stream: IO[str]
    live: bool
    clock: Callable[[], float] = time.monotonic
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _last_plain: float = 0.0
    _shown: bool = False

    def tick(self) -> None:
        if not _current:
            return
        stage = _current[0]
        now = self.clock()
        line = progress_line(stage, *self.counts(stage.group), now)
        if self.live:
            self.stream.write("\r\x1b[K" + line)
            self._shown = True
        elif now - self._last_plain >= PLAIN_EVERY_S and now - stage.started >= PLAIN_EVERY_S:
            self.stream.write(line + "\n")
            self._last_plain = now
        self.stream.flush()

    def clear(self) -> None:
        """Remove the live line (before another line is printed); it comes back at the next tick."""
        if self.live and self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False

    def start(self) -> Reporter:
        every = LIVE_EVERY_S if self.live else 1.0

        def loop() -> None:
            while not self._stop.wait(every):
                try:
                    self.tick()
                except Exception:  # a progress line must never fail a run
                    return

        self._thread = threading.Thread(target=loop, name="segpipe-progress", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.clear()  # the live line goes; the run's own lines follow
