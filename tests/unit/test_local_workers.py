"""The driver's own worker processes (runtime.local_workers): which masters they stand in for,
results in order, typed errors back, and a failed run leaves no process of theirs running."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelines.errors import Terminated
from pipelines.runtime.local_flow import FLOW_OWNER, FLOW_PREFIX, LocalFlow, sweep_dead_flows
from pipelines.runtime.local_workers import LocalWorkers, WorkerLost, local_cores
from pipelines.runtime.submitted import GATEWAY_PORT, submitted_master
from segment_io.errors import CrcMismatch
from segment_io.exit_codes import ExitCode
from tests.helpers import REPO

pytestmark = pytest.mark.unit


@pytest.fixture
def workers() -> Iterator[LocalWorkers]:
    local = LocalWorkers(2, ["segment_io.errors"])
    yield local
    local.close()


@pytest.mark.parametrize(
    ("master", "settings", "remote", "cores"),
    [
        (None, {}, None, os.cpu_count()),  # Spark's default here: local[*]
        ("local", {}, None, 1),
        ("local[3]", {}, None, 3),
        ("local[*]", {}, None, os.cpu_count()),
        ("local[2,4]", {}, None, 2),  # with task retries
        (None, {"spark.master": "local[5]"}, None, 5),
        ("spark://127.0.0.1:7077", {}, None, None),  # a cluster's cores are elsewhere
        (None, {"spark.master": "yarn"}, None, None),
        (None, {}, "sc://127.0.0.1:15002", None),  # Spark Connect: the server's
        ("local-cluster[2,1,1024]", {}, None, None),
    ],
)
def test_only_a_local_master_is_stood_in_for(
    master: str | None,
    settings: dict[str, str],
    remote: str | None,
    cores: int | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(GATEWAY_PORT, raising=False)
    monkeypatch.delenv("SEGPIPE_MASTER", raising=False)
    assert local_cores(master, settings, remote) == cores


def test_a_submitted_driver_whose_jvm_does_not_answer_is_not_taken_for_local(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under spark-submit the master is the submitter's (its JVM says which: a real submitter in
    tests/e2e/test_clean_cli.py); unanswered, the run goes to Spark rather than guess local. A
    master the run names itself is the run's, as its session is started with it."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # closed on leaving: nothing listens there
    monkeypatch.setenv(GATEWAY_PORT, str(port))  # what spark-submit sets for its driver
    monkeypatch.setenv("SEGPIPE_MASTER", "local[2]")  # read only where nothing was submitted
    assert submitted_master() is None
    assert local_cores(None, {}, None) is None
    assert local_cores("local[3]", {}, None) == 3


def test_results_come_back_in_item_order_from_other_processes(workers: LocalWorkers) -> None:
    offset = 1000  # travels with the work, as a closure's state travels to a Spark task
    results = workers.map(lambda i: (i + offset, os.getpid()), list(range(20)))
    assert [r for r, _ in results] == list(range(1000, 1020))
    assert os.getpid() not in {pid for _, pid in results}


def test_a_typed_error_comes_back_as_itself(workers: LocalWorkers) -> None:
    def fail(i: int) -> int:
        if i == 3:
            raise CrcMismatch("/data/orders-0/00000000000000000000.log", 4096, "stored 1, computed 2")
        return i

    with pytest.raises(CrcMismatch) as caught:
        workers.map(fail, list(range(6)))
    assert caught.value.path == "/data/orders-0/00000000000000000000.log"
    assert caught.value.position == 4096
    assert workers.map(lambda i: i * 2, [1, 2]) == [2, 4]  # new processes serve the next map


def test_an_error_kills_the_work_still_running(workers: LocalWorkers, tmp_path: Path) -> None:
    """One item fails while another waits forever (opening a pipe nobody writes): the map raises
    at once, and the waiting process is gone when it does. The two meet at a second pipe first
    (opening one end waits for the other), so the failure comes while the other item runs."""
    pids, meet, never = tmp_path / "pids", tmp_path / "meet", tmp_path / "never-written"
    pids.mkdir()
    os.mkfifo(meet)
    os.mkfifo(never)

    def work(i: int) -> int:
        (pids / str(os.getpid())).write_text(str(i))
        if i == 1:
            with open(meet, "rb"):
                raise ValueError(f"item {i} failed")
        with open(meet, "wb"), open(never, "rb") as waiting:
            waiting.read()
        return i

    with pytest.raises(ValueError, match="item 1 failed"):
        workers.map(work, [0, 1])
    waiting = [int(p.name) for p in pids.iterdir() if p.read_text() == "0"]
    assert len(waiting) == 1
    with pytest.raises(ProcessLookupError):
        os.kill(waiting[0], 0)


def test_a_stop_kills_the_processes_before_it_propagates(
    workers: LocalWorkers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop signal reaches the driver while an item runs (the item sends it, then waits forever):
    the map ends with the stop's exception, and the item's process is gone when it does."""
    driver, pids, never = os.getpid(), tmp_path / "pids", tmp_path / "never-written"
    pids.mkdir()
    os.mkfifo(never)

    def stop(signum: int, frame: object) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGUSR1, stop)
    try:

        def work(i: int) -> int:
            (pids / str(os.getpid())).write_text(str(i))
            os.kill(driver, signal.SIGUSR1)
            with open(never, "rb") as waiting:
                waiting.read()
            return i

        with pytest.raises(Terminated):
            workers.map(work, [0])
    finally:
        signal.signal(signal.SIGUSR1, previous)
    [pid] = [int(p.name) for p in pids.iterdir()]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_local_flow_routes_every_item_to_its_parts_task_through_files(workers: LocalWorkers) -> None:
    """Items go from the tasks that made them to the task of their part (every part's task runs,
    one no item is for too), by way of files that are gone once read, the flow's directory
    with the flow."""
    with LocalFlow(workers) as flow:
        made = flow.each([range(0, 50), range(50, 100)], lambda numbers: ((n % 4, n) for n in numbers))
        assert all(os.path.exists(spill.path) for spill in made)
        summed = flow.routed(made, 5, lambda part, items: [(part, (part, sorted(items)))])
        assert not any(os.path.exists(spill.path) for spill in made)
        got = dict(obj for _, obj in flow.collected(summed))
        directory = flow.directory
        assert os.listdir(directory) == [FLOW_OWNER]
    assert got == {p: [n for n in range(100) if n % 4 == p] for p in range(4)} | {4: []}
    assert not os.path.exists(directory)


def test_a_flow_sweeps_the_spill_of_flows_whose_process_died(
    workers: LocalWorkers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run killed with SIGKILL leaves its spill directory behind; the next flow removes it, but
    never the directory of a flow that lives (its owner file stays locked) or a directory
    without an owner file."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    script = (
        "import os, signal, sys\n"
        "from pipelines.runtime import local_flow as lw\n"
        "d = sys.argv[1] + '/' + lw.FLOW_PREFIX + 'killed'\n"
        "os.mkdir(d)\n"
        "lw._own(d)\n"
        "open(d + '/spill', 'wb').write(b'x' * 1000)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    killed = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=REPO, timeout=60)
    assert killed.returncode == -signal.SIGKILL and (tmp_path / f"{FLOW_PREFIX}killed" / "spill").exists()
    (tmp_path / f"{FLOW_PREFIX}unowned").mkdir()
    with LocalFlow(workers) as living:
        assert not (tmp_path / f"{FLOW_PREFIX}killed").exists()
        with LocalFlow(workers) as second:
            assert os.path.isdir(living.directory) and os.path.isdir(second.directory)
        assert sweep_dead_flows(str(tmp_path)) == [] and os.path.isdir(living.directory)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{FLOW_PREFIX}unowned"]


def test_a_process_that_dies_fails_the_map_with_a_typed_error(workers: LocalWorkers) -> None:
    """A worker killed mid-item (as the kernel's OOM killer would) is a WorkerLost error naming
    what happened, never a hang; the next map gets new processes."""

    def die(i: int) -> int:
        if i == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return i

    with pytest.raises(WorkerLost, match="ended without an answer") as caught:
        workers.map(die, list(range(4)))
    assert caught.value.exit_code == ExitCode.INTERNAL
    assert workers.map(lambda i: i + 1, [1, 2]) == [2, 3]


# A command line's driver as it starts: one thread (the command line's package holds numpy and
# pyarrow to it), a SIGTERM handler of its own, then the workers.
FORKED_DRIVER = """
import json, os, select, signal, sys, threading
import pipelines.cli
from pipelines.runtime.local_workers import LocalWorkers, WorkerLost

handled = []
signal.signal(signal.SIGTERM, lambda *_: handled.append(os.getpid()))
workers = LocalWorkers(2, ["segment_io.errors"])
if sys.argv[1] == "thread":  # another thread runs as the workers start
    stop = threading.Event()
    threading.Thread(target=stop.wait, daemon=True).start()
workers.start()
offset = 1000
results = workers.map(lambda i: (i + offset, os.getpid(), os.getppid()), list(range(6)))
victim = os.pidfd_open(results[0][1])
os.kill(results[0][1], signal.SIGTERM)  # a worker that ran the driver's handler would live on
ended = bool(select.select([victim], [], [], 60)[0])  # readable once the process has ended
try:  # whether the pool has noticed yet or not: right results or the typed error, nothing else
    after = "same" if workers.map(lambda i: i, list(range(4))) == list(range(4)) else "wrong"
except WorkerLost:
    after = "lost"
print(json.dumps({"forked": workers.forked_from_driver, "driver": os.getpid(), "results": results,
                  "handled": handled, "ended": ended, "after": after}))
workers.close()
"""


@pytest.mark.parametrize("others", ["none", "thread"])
def test_a_driver_on_one_thread_forks_its_workers_itself(others: str) -> None:
    """From a driver that runs one thread the workers fork from it (their parent is the driver;
    nothing is imported again); with another thread running they fork from a server. Either way
    the results are the same, and a SIGTERM ends a worker as it ends any process (the driver's
    own handler stays the driver's); the next map then gives its results or WorkerLost."""
    proc = subprocess.run(
        [sys.executable, "-c", FORKED_DRIVER, others], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json_line(proc.stdout)
    assert [r[0] for r in seen["results"]] == list(range(1000, 1006))
    parents = {r[2] for r in seen["results"]}
    assert seen["driver"] not in {r[1] for r in seen["results"]}
    if others == "none":
        assert seen["forked"] is True and parents == {seen["driver"]}
    else:
        assert seen["forked"] is False and seen["driver"] not in parents
    assert seen["ended"] is True and seen["handled"] == [] and seen["after"] in ("same", "lost")


SERVED_CLIENT = """
import json, sys, threading
from pipelines.runtime.local_workers import LocalWorkers
from segment_io.storage import load_client

load_client("s3://bucket/prefix")
threading.Thread(target=threading.Event().wait, daemon=True).start()  # the store client's I/O thread
workers = LocalWorkers(2, ["segment_io.errors"])
workers.start()
workers._join_start()
started = len(workers._pool._processes)  # before any item: none is spawned in the middle of a map
loaded = workers.map(lambda _: "s3fs.core" in sys.modules, [0, 1, 2, 3])
print(json.dumps({"forked": workers.forked_from_driver, "started": started, "loaded": loaded}))
workers.close()
"""


def test_workers_forked_from_a_server_start_with_the_drivers_store_clients() -> None:
    """A driver already running another thread has its workers forked from a server: the server
    loads the store clients the driver loaded, as Spark's worker daemon does, so no item imports
    one; every process starts with the server, none in the middle of a map (where a stop could
    cut one off from the pool's record)."""
    proc = subprocess.run(
        [sys.executable, "-c", SERVED_CLIENT], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json_line(proc.stdout) == {"forked": False, "started": 2, "loaded": [True] * 4}


def json_line(stdout: str) -> dict:  # type: ignore[type-arg]
    import json

    return json.loads(stdout.strip().splitlines()[-1])


EARLY = """
import json, multiprocessing, os, sys, threading
import pipelines.cli
from pipelines.cli.main import build_parser
from pipelines.cli.spark_args import spark_on_demand, workers_forked_early
from pipelines.errors import ConfigError

refused, argv = sys.argv[1] == "refused", sys.argv[2:]
args = build_parser().parse_args(argv)
seen = {"driver": os.getpid()}
try:
    with workers_forked_early(args):
        seen["early"] = len(multiprocessing.active_children())
        stop = threading.Event()
        threading.Thread(target=stop.wait, daemon=True).start()  # the store client's I/O thread
        if refused:
            raise ConfigError("refused after its first listing")
        with spark_on_demand(args, False, args.job_module, local_likely=True) as lazy:
            seen["pids"] = lazy.local.map(lambda _: (os.getpid(), os.getppid()), list(range(4)))
            seen["forked"] = lazy.local.forked_from_driver
except ConfigError:
    pass
seen["after"] = len(multiprocessing.active_children())
print(json.dumps(seen))
"""


@pytest.mark.parametrize(
    ("dst", "refused", "forked"),
    [("memory://bucket/tier", False, True), ("tier", False, False), ("memory://bucket/tier", True, None)],
    ids=["object-store", "local-disk", "refused"],
)
def test_a_run_that_names_an_object_store_forks_its_workers_before_its_first_request(
    tmp_path: Path, dst: str, refused: bool, forked: bool | None
) -> None:
    """An object store's client starts an I/O thread with its first request, before the run's
    workers would start: where a run names one, they fork from the driver at once (their parent
    is the driver) and the run takes them; a run refused meanwhile leaves none behind. A run on
    local disks starts them later as before (here, with another thread running: from a server)."""
    target = dst if "://" in dst else str(tmp_path / dst)
    argv = ["tier", str(tmp_path / "log"), target, "--master", "local[2]"]
    proc = subprocess.run(
        [sys.executable, "-c", EARLY, "refused" if refused else "run", *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json_line(proc.stdout)
    assert seen["early"] == (2 if "://" in dst else 0)
    assert seen["after"] == 0
    if forked is None:
        assert "pids" not in seen
        return
    assert seen["forked"] is forked
    parents = {parent for _, parent in seen["pids"]}
    assert (parents == {seen["driver"]}) is forked


KILLED_DRIVER = """
import os, signal, sys, threading
import pipelines.cli
from pipelines.runtime.local_workers import LocalWorkers

if sys.argv[1] == "thread":
    threading.Thread(target=threading.Event().wait, daemon=True).start()
workers = LocalWorkers(2, ["segment_io.errors"])
workers.start()
pids = workers.map(lambda _: os.getpid(), [0, 1, 2, 3])
print(" ".join(map(str, sorted(set(pids)))), flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # no handler, no shutdown: as the OOM killer ends a driver
"""


@pytest.mark.parametrize("others", ["none", "thread"])
def test_workers_end_with_a_driver_killed_outright(others: str) -> None:
    """A driver killed with SIGKILL runs no cleanup: its workers, forked from it or from a server,
    end with it instead of waiting for work forever."""
    import select

    proc = subprocess.run(
        [sys.executable, "-c", KILLED_DRIVER, others], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    pids = [int(p) for p in proc.stdout.split()]
    assert len(pids) >= 1
    for pid in pids:
        try:
            handle = os.pidfd_open(pid)
        except ProcessLookupError:  # already gone
            continue
        try:  # readable once the process has ended
            ended = bool(select.select([handle], [], [], 30)[0])
        finally:
            os.close(handle)
        assert ended, f"worker {pid} outlived its killed driver"
