"""Durable publication, seen in the system calls of a real run: every file published into the
output is fsynced before the rename that publishes it, the staging directories are synced before
the output is renamed into place, and the output's parent after it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from segment_io.exit_codes import ExitCode

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
NOW = 1_700_700_000_000

_CALL = re.compile(r"^(?P<name>\w+)\((?P<args>.*)\)\s+=\s+(?P<ret>-?\d+)")
_PATHS = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _events(trace: Path) -> list[tuple[str, list[str], int, str]]:
    """(call, quoted paths, return value, raw args) per finished system call of one process."""
    out = []
    for line in trace.read_text(errors="replace").splitlines():
        match = _CALL.match(line)
        if match:
            args = match["args"]
            out.append((match["name"], _PATHS.findall(args), int(match["ret"]), args))
    return out


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace to watch the system calls")
def test_every_published_file_is_synced_before_its_rename(tmp_path: Path, sample_dir: Path) -> None:
    out = tmp_path / "out"
    traces = tmp_path / "trace"
    proc = subprocess.run(
        [
            "strace",
            "-ff",
            "-qq",
            "-e",
            "trace=openat,fsync,fdatasync,close,rename,renameat,renameat2",
            "-o",
            str(traces),
            sys.executable,
            "-m",
            "pipelines.cli",
            "clean",
            str(sample_dir),
            str(out),
            "--config",
            "conf/samples.yaml",
            "--now-ms",
            str(NOW),
            "--master",
            "local[1]",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == ExitCode.OK, proc.stderr
    published = 0
    output_renamed = parent_synced = False
    for trace in tmp_path.glob("trace.*"):  # one file per process: the CLI, the JVM, the workers
        open_fds: dict[int, str] = {}
        synced: set[str] = set()
        for call, paths, ret, args in _events(trace):
            if call == "openat" and ret >= 0 and paths:
                open_fds[ret] = paths[0]
            elif call in ("fsync", "fdatasync") and ret == 0:
                synced.add(open_fds.get(int(args.split(",")[0]), "?"))
                parent_synced |= output_renamed and str(tmp_path) in synced
            elif call == "close":
                open_fds.pop(int(args), None)
            elif call.startswith("rename") and ret == 0 and len(paths) == 2:
                src, dst = paths
                if ".segpipe-staging-" in src and src.endswith(".tmp"):
                    assert src in synced, f"{dst} published before its bytes were synced"
                    published += 1
                elif ".segpipe-staging-" in src and dst == str(out):
                    assert {src, f"{src}/orders-0", f"{src}/_segpipe"} <= synced  # the staging tree first
                    output_renamed = True
    assert published >= 20  # segments, indexes, checkpoints, snapshots, manifest, report
    assert output_renamed and parent_synced  # DST's entry in its parent made durable after the rename
