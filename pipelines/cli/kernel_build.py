"""Compiles segpipe's kernels into numba's on-disk cache (segment_io.kernel) ahead of the first
run, as the class archive is built ahead of the first Spark start: the commands run over a log
with every feature (the samples' topics, generated here), in the driver, so that no later
process compiles what they compile. With an empty cache a clean of the samples takes about 40 s
of CPU, with a full one under 3 s. Kernels called only with arrays another path hands them (Arrow
buffers in Spark tasks, an object store's immutable bytes) are compiled for those where first
called. Run by scripts/bootstrap; a command that fails here costs only the speed-up."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from segment_io.exit_codes import ExitCode
from segment_io.generate_spec import default_specs

NOW_MS = "1700700000000"  # the samples' clock: their retention and compaction both have work
COMPACT_AND_DELETE = [
    "--set",
    "cleanup.policy=compact,delete",
    "--set",
    "retention.ms=259200000",
    "--now-ms",
    NOW_MS,
]


def workload(root: Path) -> list[list[str]]:
    """The command lines, in order, over the log generated at `root`/log."""
    log, keys = root / "log", root / "keys.txt"
    keys.write_text("".join(f"key-{i}\n" for i in range(40)))
    return [
        ["dump", str(log), "--limit", "5"],
        ["clean", str(log), str(root / "clean"), *COMPACT_AND_DELETE],
        ["validate", str(root / "clean"), "--against", str(log), *COMPACT_AND_DELETE],
        ["erase", str(log), str(root / "erase"), "--keys", str(keys)],
        ["tier", str(log), str(root / "tier"), "--set", "retention.ms=-1", "--now-ms", NOW_MS],
        ["restore", str(root / "tier"), str(root / "restored")],
    ]


def build(root: Path) -> list[str]:
    """Generate the log and run the workload; the command lines that failed."""
    from pipelines.cli.main import main as segpipe
    from segment_io.generate import generate_log_dir
    from segment_io.storage import open_storage

    storage, path = open_storage(str(root / "log"))
    generate_log_dir(storage, path, default_specs())
    failed = []
    for argv in workload(root):
        code: int | str | None
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                code = segpipe(["--quiet", *argv])
        except SystemExit as exc:  # the parser's refusal
            code = exc.code
        if code in (ExitCode.INTERRUPTED, ExitCode.TERMINATED):  # a stop ends the build, not a step of it
            raise KeyboardInterrupt
        if code != ExitCode.OK:
            failed.append(" ".join(argv))
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    del argv
    try:
        with tempfile.TemporaryDirectory(prefix="segpipe-kernels-") as tmp:
            failed = build(Path(tmp))
    except KeyboardInterrupt:
        print("kernel build stopped; the rest compile where first called", file=sys.stderr)
        return ExitCode.INTERRUPTED
    where = os.environ.get("NUMBA_CACHE_DIR", "")  # segment_io.kernel sets it where unset
    print(f"kernels compiled into {where}" + (f"; these failed: {failed}" if failed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
