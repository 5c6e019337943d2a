"""A Spark Connect server for tests, from PySpark's own distribution: one local[2] JVM on
127.0.0.1 with a free port, its Python workers running this interpreter (which sees segpipe) and
forked from segpipe's worker daemon with every job's modules loaded (README: Spark Connect), or,
`without_segpipe`, this interpreter with every third-party package but segpipe itself (as on a
server nobody installed segpipe on: each client sends its own). It stops when the `with` block
ends (killed after STOP_TIMEOUT_S).

    .venv/bin/python -m tests.connect_server     # run one by hand; prints its sc:// URL
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

START_TIMEOUT_S = 120.0  # a cold JVM on 2 busy cores answers in 10-20 s
STOP_TIMEOUT_S = 20.0
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


# Run first by the workers' Python: the editable install of segpipe (a finder on sys.meta_path, and
# a path hook) and the repository's own directory taken away, every other package left.
WITHOUT_SEGPIPE = """
import sys
sys.meta_path[:] = [f for f in sys.meta_path if "Editable" not in getattr(f, "__name__", type(f).__name__)]
sys.path_hooks[:] = [h for h in sys.path_hooks if "Editable" not in getattr(h, "__name__", type(h).__name__)]
sys.path[:] = [p for p in sys.path if p not in ("", {repo!r})]
"""


def python_without_segpipe(directory: Path) -> Path:
    """An interpreter (a script around this one) that cannot import segpipe's packages."""
    from tests.helpers import REPO

    (directory / "sitecustomize.py").write_text(WITHOUT_SEGPIPE.format(repo=str(REPO)))
    script = directory / "python"
    script.write_text(f'#!/bin/sh\nPYTHONPATH="{directory}" exec "{sys.executable}" "$@"\n')
    script.chmod(0o755)
    return script


def server_preload() -> list[str]:
    """The modules every job's tasks run, which the server's workers load before they fork."""
    from pipelines.jobs.clean.job import WORKER_MODULES as CLEAN
    from pipelines.jobs.cut.job import WORKER_MODULES as CUT
    from pipelines.jobs.erase.job import WORKER_MODULES as ERASE
    from pipelines.jobs.tier.job import WORKER_MODULES as TIER
    from pipelines.jobs.tier.restore import WORKER_MODULES as RESTORE
    from pipelines.jobs.validate.job import WORKER_MODULES as VALIDATE

    return sorted({*CLEAN, *CUT, *ERASE, *TIER, *RESTORE, *VALIDATE, "pipelines.sources.kafka_segments"})


@contextmanager
def connect_server(log_path: Path | None = None, without_segpipe: bool = False) -> Iterator[str]:
    """A running server's URL (sc://127.0.0.1:PORT); its log goes to `log_path` (or a temp file)."""
    import pyspark

    from pipelines.runtime.session import DRIVER_JAVA_OPTIONS, driver_java_options
    from pipelines.runtime.worker_daemon import PRELOAD_ENV

    home = Path(pyspark.__file__).parent
    port = _free_port()
    workdir = Path(tempfile.mkdtemp(prefix="segpipe-connect-"))
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "PYSPARK_PYTHON": str(python_without_segpipe(workdir)) if without_segpipe else sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    if not without_segpipe:  # a server with segpipe installed forks its workers as segpipe does
        env[PRELOAD_ENV] = ",".join(server_preload())
    env.pop("SPARK_REMOTE", None)
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    settings = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.python.worker.reuse": "true",
        # The quick compiler and the install's class archive, as segpipe starts a driver itself.
        DRIVER_JAVA_OPTIONS: driver_java_options(),
    }
    if not without_segpipe:
        settings["spark.python.daemon.module"] = "pipelines.runtime.worker_daemon"
    command = [str(home / "bin" / "spark-submit"), "--master", "local[2]", "--class", SERVER_CLASS]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    command.append("spark-internal")
    log = open(log_path, "wb") if log_path else tempfile.TemporaryFile()  # noqa: SIM115
    proc = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=workdir
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers(port):
            if proc.poll() is not None:
                raise RuntimeError(f"the Spark Connect server exited with {proc.returncode} before answering")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Spark Connect server did not answer within {START_TIMEOUT_S:.0f} s")
            time.sleep(0.2)  # bounded by the deadline
        yield f"sc://127.0.0.1:{port}"
    finally:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=STOP_TIMEOUT_S)
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    with connect_server() as url:
        print(f"Spark Connect server at {url}; Ctrl-C stops it")
        with suppress(KeyboardInterrupt):
            signal.pause()
