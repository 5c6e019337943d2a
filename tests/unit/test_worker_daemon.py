"""The worker daemon forks only from a single-threaded process and ends workers quietly on hang-up."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.jobs.clean import WORKER_MODULES
from pipelines.runtime.worker_daemon import SPARK_RUNTIME_ENV, quiet_on_hang_up
from segment_io.exit_codes import ExitCode

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


def test_preloading_the_clean_jobs_worker_modules_and_a_store_client_leaves_one_thread() -> None:
    """A module the workers' Python lacks (a client only the driver has) is passed over."""
    code = (
        "import sys, pipelines.runtime.worker_daemon as w; w.hold_to_one_thread(); "
        f"w._preload({[*WORKER_MODULES, 'no_such_client.core', 's3fs.core']!r}); "
        "print(w.thread_count(), 's3fs.core' in sys.modules, w.BACKEND_MODULE in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == ExitCode.OK, out.stderr
    assert out.stdout.split() == ["1", "True", "True"]


def _flush_to(sock: socket.socket, authenticated: bool) -> int:
    """A worker that writes its output after the JVM's end of the connection is gone."""
    with sock.makefile("wb") as out:
        out.write(b"x" * 1024)
        out.flush()
    return 0


def test_a_worker_whose_jvm_hung_up_ends_without_a_traceback(capfd: pytest.CaptureFixture[str]) -> None:
    jvm, worker = socket.socketpair(socket.AF_UNIX)
    jvm.close()
    with worker, pytest.raises(BrokenPipeError):
        _flush_to(worker, True)  # what PySpark's daemon would print as a traceback
    jvm, worker = socket.socketpair(socket.AF_UNIX)
    jvm.close()
    with worker:
        assert quiet_on_hang_up(_flush_to)(worker, True) == 1  # non-zero: the daemon ends it
    assert capfd.readouterr().err == ""


def test_a_connected_worker_keeps_its_code_and_other_errors() -> None:
    jvm, worker = socket.socketpair(socket.AF_UNIX)
    with jvm, worker:
        assert quiet_on_hang_up(_flush_to)(worker, True) == 0
        assert len(jvm.recv(4096)) > 0

    def fails(sock: socket.socket, authenticated: bool) -> int:
        raise ValueError("a bug, not a hang-up")

    with pytest.raises(ValueError):
        quiet_on_hang_up(fails)(worker, True)


@pytest.mark.parametrize("runtime", ["PYTHON_WORKER", None], ids=["spark-worker", "driver"])
def test_the_data_source_freezes_what_it_loads_only_in_a_spark_worker(runtime: str | None) -> None:
    """PySpark's plain daemon serves the planner's calls from reused workers and collects garbage
    after each: there the source's module leaves its imports frozen; anywhere else it changes
    nothing of the collector."""
    env = {k: v for k, v in os.environ.items() if k != SPARK_RUNTIME_ENV}
    if runtime:
        env[SPARK_RUNTIME_ENV] = runtime
    code = "import gc, pipelines.sources.kafka_segments; print(gc.get_freeze_count(), len(gc.get_objects()))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )
    assert out.returncode == ExitCode.OK, out.stderr
    frozen, walked = map(int, out.stdout.split())
    assert frozen > 10 * walked if runtime else frozen == 0  # what a collection still walks
