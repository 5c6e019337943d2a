"""What the command line prints, and how much: `-q` keeps only `segpipe:` lines (warnings and
totals) and errors; `-v` adds Spark's own log and tracebacks. Spark's start-up noise on stderr is
held back unless `-v`."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

QUIET, NORMAL, VERBOSE = 0, 1, 2
_level = NORMAL

# Lines the JVM and Spark print at every start that tell an operator nothing.
NOISE = re.compile(
    rb"^(WARNING: Using incubator modules|Using Spark's default log4j profile|Setting default log level"
    rb"|To adjust logging level use|.*WARN NativeCodeLoader: )"
)


def set_level(level: int) -> None:
    global _level
    _level = level


def level() -> int:
    return _level


# Called before each line is printed: a live progress line on the terminal is cleared first.
_before_line: list[Callable[[], None]] = []


def say(line: str) -> None:
    """A line of a command's output (stdout); under -q only `segpipe:` lines are kept."""
    if _level > QUIET or line.startswith("segpipe:"):
        for clear in _before_line:
            clear()
        print(line, flush=True)


def warn(line: str) -> None:
    """A `segpipe:` line beside a command's output (stderr), so a stream on stdout stays whole."""
    print(f"segpipe: {line}", file=sys.stderr, flush=True)


@contextmanager
def progress(spark: Any, terminal_fd: int) -> Iterator[None]:
    """Progress lines on the terminal's stderr (`terminal_fd`) while Spark runs; not under -q."""
    if _level == QUIET or terminal_fd < 0:
        yield
        return
    from pipelines.runtime.progress import Reporter, counter

    stream = os.fdopen(os.dup(terminal_fd), "w")
    reporter = Reporter(counter(spark), stream, live=os.isatty(terminal_fd)).start()
    _before_line.append(reporter.clear)
    try:
        yield
    finally:
        _before_line.remove(reporter.clear)
        reporter.stop()
        stream.close()


@contextmanager
def held_back_noise() -> Iterator[int]:
    """While Spark runs, this process's stderr (which the JVM and Python workers inherit) passes
    through a filter that drops the NOISE lines; unless -v. Yields the terminal's own stderr (a
    descriptor; -1 when there is none) for lines that must not wait for a newline."""
    try:
        original = os.dup(2)
    except OSError:  # no stderr at all (`2>&-`): nothing to filter
        original = -1
    if _level >= VERBOSE or original < 0:
        yield original
        return
    _flush_stderr()
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)

    def forward() -> None:
        # Drains the pipe to the end whatever happens to the real stderr: a writer (the JVM)
        # blocked on a full pipe would hang the run.
        with os.fdopen(read_end, "rb") as lines:
            for line in lines:
                if not NOISE.match(line):
                    with contextlib.suppress(OSError):
                        os.write(original, line)

    # A daemon: the JVM may still hold the pipe open while this process ends.
    threading.Thread(target=forward, name="segpipe-stderr", daemon=True).start()
    try:
        yield original
    finally:
        _flush_stderr()
        os.dup2(original, 2)


def _flush_stderr() -> None:
    if sys.stderr is not None:  # None when the process was started without one
        sys.stderr.flush()
