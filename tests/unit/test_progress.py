"""Progress lines from a status tracker (a stand-in with Spark's StatusTracker methods) and a
fixed clock: tasks done of all, an estimate of the rest; live on a terminal, sparse elsewhere."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest

from pipelines.runtime import progress

pytestmark = pytest.mark.unit


class Tracker:
    """Two jobs in the group: stages of 10 and 30 tasks."""

    def __init__(self) -> None:
        self.done = {1: 0, 2: 0}

    def getJobIdsForGroup(self, group: str) -> list[int]:
        return [7, 8] if group == "segpipe-scan" else []

    def getJobInfo(self, job: int) -> SimpleNamespace:
        return SimpleNamespace(stageIds=[1] if job == 7 else [2])

    def getStageInfo(self, stage: int) -> SimpleNamespace:
        return SimpleNamespace(numTasks={1: 10, 2: 30}[stage], numCompletedTasks=self.done[stage])


class Context:
    def setJobGroup(self, group: str, description: str) -> None:
        self.group = group


def test_a_live_line_counts_tasks_and_estimates_the_rest() -> None:
    now = [100.0]
    tracker, out = Tracker(), io.StringIO()
    progress.enter(Context(), "scan", clock=lambda: now[0])
    reporter = progress.Reporter(
        lambda group: progress.tasks_of(tracker, group), out, live=True, clock=lambda: now[0]
    )
    now[0] = 110.0
    tracker.done = {1: 10, 2: 10}  # 20 of 40 in 10 s: about 10 s to go
    reporter.tick()
    assert out.getvalue() == "\r\x1b[Ksegpipe: scan: 20/40 tasks, 10 s, about 10 s to go"
    reporter.clear()
    assert out.getvalue().endswith("\r\x1b[K")
    progress.leave()
    reporter.tick()  # no stage under way: nothing
    assert out.getvalue().count("segpipe:") == 1


def test_a_stage_that_reads_bytes_shows_mb_and_mb_per_second() -> None:
    now = [0.0]
    tracker, out = Tracker(), io.StringIO()
    progress.enter(Context(), "scan", clock=lambda: now[0])
    progress.add_bytes(300 * progress.MB)
    progress.add_bytes(100 * progress.MB)  # a second packing in the same stage adds up
    reporter = progress.Reporter(
        lambda group: progress.tasks_of(tracker, group), out, live=True, clock=lambda: now[0]
    )
    now[0] = 4.0
    tracker.done = {1: 10, 2: 0}  # a quarter of the tasks: about 100 of 400 MB in 4 s
    reporter.tick()
    assert out.getvalue().endswith("scan: 10/40 tasks, about 100/400 MB, 25 MB/s, 4 s, about 12 s to go")
    progress.leave()
    progress.add_bytes(1)  # no stage under way: nothing to count it in


def test_without_a_terminal_a_plain_line_comes_every_half_minute() -> None:
    now = [0.0]
    tracker, out = Tracker(), io.StringIO()
    progress.enter(Context(), "scan", clock=lambda: now[0])
    reporter = progress.Reporter(
        lambda group: progress.tasks_of(tracker, group), out, live=False, clock=lambda: now[0]
    )
    for t in range(0, 95, 5):  # ticks every 5 s for 90 s
        now[0] = float(t)
        reporter.tick()
    lines = out.getvalue().splitlines()
    assert [line.split(": ", 2)[2].split(" tasks")[0] for line in lines] == ["0/40", "0/40", "0/40"]
    assert all("\r" not in line for line in lines)
    progress.leave()


class Stage:
    def __init__(self, done: int, tasks: int) -> None:
        self.num_completed_tasks, self.num_tasks = done, tasks


class ConnectSession:
    """What progress uses of a Spark Connect session: tags and a progress handler."""

    def __init__(self) -> None:
        self.tags: list[str] = []
        self.handlers: list[progress.ConnectProgress] = []

    def clearTags(self) -> None:
        self.tags.clear()

    def addTag(self, tag: str) -> None:
        self.tags.append(tag)

    def registerProgressHandler(self, handler: progress.ConnectProgress) -> None:
        self.handlers.append(handler)


def test_on_spark_connect_a_stage_tags_its_operations_and_counts_what_the_server_reports() -> None:
    session, now, out = ConnectSession(), [0.0], io.StringIO()
    counts = progress.counter(session)
    progress.enter(session, "compact", clock=lambda: now[0])
    assert session.tags == ["segpipe-compact"]
    (handler,) = session.handlers
    handler([Stage(3, 4), Stage(0, 4)], 1, "op-1", False)
    handler([Stage(4, 4)], 0, "op-2", True)
    reporter = progress.Reporter(counts, out, live=True, clock=lambda: now[0])
    now[0] = 7.0
    reporter.tick()
    assert out.getvalue().endswith("compact: 7/12 tasks, 7 s, about 5 s to go")
    progress.enter(session, "copy", clock=lambda: now[0])  # a new stage counts afresh
    assert session.tags == ["segpipe-copy"] and counts("segpipe-copy") == (0, 0)
    progress.leave()
