"""A Spark standalone cluster on 127.0.0.1 from PySpark's own distribution: one master and N
workers, each its own JVM in a process group of its own (so one can be killed, executors and
all), logs and work directories under one directory that goes with it.

    .venv/bin/python -m tests.cluster.standalone     # `make cluster`: start one, print how to
                                                     # submit to it, stop it on Ctrl-C
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from pipelines.runtime.session import driver_java_options

SPARK_HOME = Path(pyspark.__file__).parent
START_TIMEOUT_S = 90.0  # a cold JVM on 2 busy cores registers in a few seconds
STOP_TIMEOUT_S = 20.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    master_url: str
    root: Path
    master: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def kill_worker(self, index: int) -> None:
        """SIGKILL a worker and everything it started (its executor JVMs): a lost host."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.workers[index].pid, signal.SIGKILL)
        self.workers[index].wait(timeout=STOP_TIMEOUT_S)

    def executor_logs(self, index: int) -> list[Path]:
        """The stderr files of the executors worker `index` ran."""
        return sorted((self.root / f"worker-{index}" / "work").glob("app-*/*/stderr"))

    def stop(self) -> None:
        procs = [*self.workers, self.master]
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=STOP_TIMEOUT_S)


def _daemon(cls: str, args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), cls, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while text not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-5:])
            raise RuntimeError(f"{what} did not start (exit {proc.poll()}): {tail}")
        time.sleep(0.2)


@contextmanager
def standalone(workers: int = 2, cores: int = 1, memory: str = "2g") -> Iterator[Cluster]:
    """A master and `workers` workers of `cores` cores and `memory` each, on 127.0.0.1; stopped
    and removed on exit."""
    root = Path(tempfile.mkdtemp(prefix="segpipe-cluster-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(root / "logs"),
        # The daemons only schedule: the quick compiler, and the install's class archive (the
        # Spark classes they share with a driver), start them sooner.
        SPARK_DAEMON_JAVA_OPTS=driver_java_options(),
    )
    port = _free_port()
    master_log = root / "master.log"
    master = _daemon(
        "org.apache.spark.deploy.master.Master",
        ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(_free_port())],
        master_log,
        env,
    )
    cluster = Cluster(f"spark://127.0.0.1:{port}", root, master)
    try:
        _wait_for(master_log, "I have been elected leader", master, "the Spark master")
        for index in range(workers):
            work = root / f"worker-{index}" / "work"
            work.mkdir(parents=True)
            args = [
                cluster.master_url,
                "--host",
                "127.0.0.1",
                "--cores",
                str(cores),
                "--memory",
                memory,
                "--work-dir",
                str(work),
                "--webui-port",
                str(_free_port()),
            ]
            log = root / f"worker-{index}.log"
            cluster.workers.append(_daemon("org.apache.spark.deploy.worker.Worker", args, log, env))
        for index, proc in enumerate(cluster.workers):
            _wait_for(
                root / f"worker-{index}.log", "Successfully registered with master", proc, f"worker {index}"
            )
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    with standalone() as cluster:
        print(
            f"Spark master: {cluster.master_url} (2 workers, 1 core and 2 GiB each; logs in {cluster.root})"
        )
        print("Submit to it as README 'Running on a cluster' shows, with --master", cluster.master_url)
        print("Ctrl-C stops it.", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()


if __name__ == "__main__":
    sys.exit(main())
