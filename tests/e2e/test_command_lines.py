"""The tests' command lines (tests.command_server): a run forked from the pre-started interpreter
answers as a freshly started `python -m pipelines.cli` does, byte for byte, errors and kills
included; a call that changes what is read while importing starts a fresh interpreter."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from segment_io.exit_codes import ExitCode
from tests import command_server
from tests.helpers import files_of

NOW = "1700700000000"


def environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, **extra}


def test_a_forked_command_line_answers_as_a_fresh_one(sample_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_text("x")
    commands = [
        ["inspect", str(sample_dir), "--json"],
        ["dump", str(sample_dir / "orders-0"), "--limit", "5"],
        ["config", "describe", "--json"],
        ["clean", str(sample_dir), str(tmp_path / "taken"), "--now-ms", NOW],  # refused: exit 2
        ["inspect", str(tmp_path / "no-such-log")],
        ["clean", "--no-such-flag"],
    ]
    env = environment()
    for args in commands:
        forked = command_server.run(args, env, 120)
        fresh = command_server._fresh(args, env, 120)
        assert (forked.returncode, forked.stdout, forked.stderr) == (
            fresh.returncode,
            fresh.stdout,
            fresh.stderr,
        )
    codes = [command_server.run(args, env, 120).returncode for args in commands]
    assert codes[:3] == [ExitCode.OK] * 3 and all(code != ExitCode.OK for code in codes[3:])


def test_a_forked_run_writes_what_a_fresh_one_writes_and_dies_alone(sample_dir: Path, tmp_path: Path) -> None:
    """Its output is the fresh run's; a kill point kills its own process group (the run and its
    workers), not the server it was forked from nor the test."""
    args = ["clean", str(sample_dir), "{out}", "--config", "conf/samples.yaml", "--now-ms", NOW]
    env = environment()
    for name, run in (("forked", command_server.run), ("fresh", command_server._fresh)):
        done = run([a.replace("{out}", str(tmp_path / name)) for a in args], env, 120)
        assert done.returncode == ExitCode.OK, done.stderr
    assert files_of(tmp_path / "forked") == files_of(tmp_path / "fresh")

    killed = command_server.run(
        [a.replace("{out}", str(tmp_path / "killed")) for a in args],
        environment(SEGPIPE_FAULT="before-publish"),
        120,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not (tmp_path / "killed").exists()
    server = command_server._started()
    assert server is not None and server.proc.poll() is None
    again = command_server.run([a.replace("{out}", str(tmp_path / "again")) for a in args], env, 120)
    assert again.returncode == ExitCode.OK and files_of(tmp_path / "again") == files_of(tmp_path / "fresh")


def test_what_is_read_while_importing_is_never_forked() -> None:
    server = command_server._started()
    assert server is not None
    assert command_server._forkable(dict(server.env), server)
    assert command_server._forkable({**server.env, "SEGPIPE_FAULT": "x", "AWS_ENDPOINT_URL": "y"}, server)
    for name in ("NUMBA_OPT", "PYTHONHASHSEED", "ARROW_IO_THREADS", "GX_ANALYTICS_ENABLED"):
        assert not command_server._forkable({**server.env, name: "changed"}, server), name


def test_a_call_that_times_out_leaves_the_server_serving(sample_dir: Path, tmp_path: Path) -> None:
    """A run paused at a kill point outlives its call's timeout: the call raises, the run's group
    is killed, and the server, whose reply then finds nobody, serves the next call."""
    import subprocess

    import pytest

    args = ["clean", str(sample_dir), str(tmp_path / "out"), "--now-ms", NOW]
    with pytest.raises(subprocess.TimeoutExpired):
        command_server.run(args, environment(SEGPIPE_FAULT="before-publish:SIGSTOP"), 10)
    assert not (tmp_path / "out").exists()
    done = command_server.run(["config", "describe", "--json"], environment(), 120)
    assert done.returncode == ExitCode.OK, done.stderr
    server = command_server._started()
    assert server is not None and server.proc.poll() is None
