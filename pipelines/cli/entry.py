"""The `segpipe` command's first code: from its first instant, before the command line's modules
are imported (nearly half a second), SIGINT and SIGTERM stop it as they stop a run: exit 130 or
143 and one line, never a traceback. `stop_exit` is that line and code, for every stop."""

from __future__ import annotations

import signal
import sys

from pipelines.errors import Terminated
from segment_io.exit_codes import ExitCode


def stop_exit(terminated: bool, published: list[str]) -> int:
    """The line a stopped command ends with, naming what it published before the stop (a stop
    that arrives during a publication lets it finish), and the exit code of the signal."""
    what = "terminated" if terminated else "interrupted"
    said = f"published before the stop: {', '.join(published)}" if published else "nothing was published"
    print(f"segpipe: {what}; {said}", file=sys.stderr)
    return ExitCode.TERMINATED if terminated else ExitCode.INTERRUPTED


def terminate(signum: int, frame: object) -> None:
    """SIGTERM's handler until a run installs its own: a stop, as Ctrl-C is."""
    raise Terminated()


def command() -> int:
    """The console script: stop signals taken as a stop, then the command line."""
    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        from pipelines.cli.main import command as run
    except KeyboardInterrupt as exc:  # nothing has been read or written yet
        return stop_exit(isinstance(exc, Terminated), [])
    return run()
