"""`segpipe` command lines for the tests, each forked from an interpreter that has imported
segpipe already.

A command line starts by importing segpipe, pyarrow and numba and loading numba's compiler back
end: about a second of CPU, most of what a small run costs, paid by every one of the suite's
hundreds of runs on two cores. Here one server per test process pays it once, and each command
line is a fork of it that then runs exactly as `python -m pipelines.cli ARGS` would: a process of
its own session (its own process group, which a test may signal or kill), the test's
environment and working directory, its own stdout and stderr, its exit code, and the
interpreter's exit (threads joined, atexit handlers run).

What a fork cannot take is an environment variable read while importing (numba's, pyarrow's,
Python's own): a call that sets one differently from the server runs a fresh interpreter
instead, as does every call where the server cannot run (it forks only while it has a single
thread). Tests of the start itself (the command as installed, spark-submit's application file)
start their processes themselves.

The server serves one test process, reads nothing but its requests and ends when that process
closes its stdin (it dies or the run ends): nothing outlives the run.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import locale
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMAND = [sys.executable, "-m", "pipelines.cli"]
# Read while importing (by Python, numpy, pyarrow, numba, fsspec or great-expectations): a fork would keep the
# server's value, so a call that changes one of them starts a fresh interpreter.
_READ_AT_IMPORT = ("PYTHON", "NUMBA_", "ARROW_", "JE_ARROW", "OPENBLAS", "OMP_", "FSSPEC", "GX_", "LD_")


# --- the server ---------------------------------------------------------------------------


def _child(request: dict[str, object], out: int, err: int) -> None:
    """In the fork: become `python -m pipelines.cli ARGS` and never return."""
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    for fd in (devnull, out, err):
        os.close(fd)
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    env = request["env"]
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(str(request["cwd"]))
    args = request["args"]
    assert isinstance(args, list)
    sys.argv = [COMMAND[0], *args]
    code: object = 0
    try:
        import runpy

        runpy.run_module("pipelines.cli", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # as the interpreter does with an uncaught exception
        import traceback

        traceback.print_exc()
        code = 1
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # the interpreter's exit: threads first,
    atexit._run_exitfuncs()  # then atexit handlers
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code or 0)


def serve(path: str) -> None:
    """Accept requests on the Unix socket `path` until stdin closes; fork one command line each."""
    from pipelines.runtime.worker_daemon import hold_to_one_thread, thread_count

    hold_to_one_thread()  # the server's own: each fork's environment is its request's
    # What most runs import later: great-expectations (every validating run: 3-4 s of CPU),
    # PySpark's test helpers and pandas with them (a second: PySpark's first call to its JVM
    # imports them, as does its Connect client), the object-store client and the jobs (about
    # half a second together).
    import great_expectations  # noqa: F401
    import pyspark.testing.utils  # noqa: F401
    import s3fs  # noqa: F401

    import pipelines.cli.main
    import pipelines.jobs.clean
    import pipelines.jobs.erase.job
    import pipelines.jobs.tier.restore
    import pipelines.jobs.validate.job
    import pipelines.run.runner
    import pipelines.runtime.numba_backend  # noqa: F401  # numba's back end, loaded once for all

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    waiting: dict[int, socket.socket] = {}
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "request")
    selector.register(wake_r, selectors.EVENT_READ, "child")
    selector.register(sys.stdin, selectors.EVENT_READ, "owner")
    if thread_count() != 1:  # forking is only safe from a single thread: the client starts fresh ones
        print("threads", flush=True)
        return
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            if key.data == "owner":
                for conn in waiting.values():
                    conn.close()
                return
            if key.data == "child":
                os.read(wake_r, 4096)
            else:
                conn, _ = listener.accept()
                message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 2)
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    conn.close()
                    _child(json.loads(message), *fds)
                for fd in fds:
                    os.close(fd)
                _reply(conn, pid)
                waiting[pid] = conn
            for pid in list(waiting):
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    conn = waiting.pop(pid)
                    _reply(conn, os.waitstatus_to_exitcode(status))
                    conn.close()


def _reply(conn: socket.socket, number: int) -> None:
    """A line to the caller, who may be gone (its call timed out): the server serves on."""
    with contextlib.suppress(OSError):
        conn.sendall(f"{number}\n".encode())


# --- the client: one server per test process ------------------------------------------------


@dataclass
class _Server:
    proc: subprocess.Popen[bytes]
    path: str
    env: dict[str, str]


_server: _Server | None = None
_lock = threading.Lock()


def _started() -> _Server | None:
    """This process's server, started on first use; None where it cannot fork."""
    global _server
    with _lock:
        if _server is None:
            path = os.path.join(tempfile.mkdtemp(prefix="segpipe-commands-"), "socket")
            env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.command_server", path],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                cwd=REPO,
                env=env,
                start_new_session=True,
            )
            assert proc.stdout is not None
            line = proc.stdout.readline()
            _server = _Server(proc, path, env if line == b"ready\n" else {})
            atexit.register(_stop, _server)
        return _server if _server.env else None


def _stop(server: _Server) -> None:
    assert server.proc.stdin is not None
    server.proc.stdin.close()
    try:
        server.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.proc.kill()
    shutil.rmtree(os.path.dirname(server.path), ignore_errors=True)


def _forkable(env: dict[str, str], server: _Server) -> bool:
    """Whether a fork of the server sees what a fresh interpreter given `env` would. Both hold to
    one thread as they start (the command line's first import): a caller that has imported the
    command line since the server started differs from it there only on paper."""
    from pipelines.runtime.worker_daemon import ONE_THREAD_ENV

    asked, served = {**ONE_THREAD_ENV, **env}, {**ONE_THREAD_ENV, **server.env}
    names = set(asked) | set(served)
    return all(asked.get(n) == served.get(n) for n in names if n.startswith(_READ_AT_IMPORT))


def _text(data: bytes) -> str:
    """As `subprocess` decodes with text=True: the locale's encoding, universal newlines."""
    return io.TextIOWrapper(io.BytesIO(data), encoding=locale.getpreferredencoding(False)).read()


def run(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """`python -m pipelines.cli ARGS` from the repository's root with `env`; its whole process
    group is killed when it ends or times out (subprocess.TimeoutExpired)."""
    server = _started()
    if server is None or not _forkable(env, server):
        return _fresh(args, env, timeout)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(server.path)
        request = json.dumps({"args": args, "env": env, "cwd": str(REPO)}).encode()
        socket.send_fds(conn, [request], [out_w, err_w])
    finally:
        os.close(out_w)
        os.close(err_w)
    replies = conn.makefile("rb")
    pid = int(replies.readline())
    try:
        out, err = _read_both(out_r, err_r, time.monotonic() + timeout, [COMMAND[0], *args])
        conn.settimeout(max(1.0, timeout))
        code = int(replies.readline())
    finally:
        kill_group(pid)
        replies.close()
        conn.close()
    return subprocess.CompletedProcess([*COMMAND, *args], code, _text(out), _text(err))


def _read_both(out: int, err: int, deadline: float, cmd: list[str]) -> tuple[bytes, bytes]:
    got = {out: bytearray(), err: bytearray()}
    selector = selectors.DefaultSelector()
    for fd in got:
        selector.register(fd, selectors.EVENT_READ)
    try:
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(cmd, left)
            for key, _ in selector.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if chunk:
                    got[key.fd] += chunk
                else:
                    selector.unregister(key.fd)
    finally:
        selector.close()
        os.close(out)
        os.close(err)
    return bytes(got[out]), bytes(got[err])


def _fresh(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen(
        [*COMMAND, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        kill_group(proc.pid)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def kill_group(pid: int) -> None:
    """Nothing of a run may outlive its test: its whole process group goes."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


if __name__ == "__main__":
    serve(sys.argv[1])
