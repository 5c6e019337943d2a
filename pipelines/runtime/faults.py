"""Named points where a run can be made to die for real, to test what a crash leaves behind.

`SEGPIPE_FAULT=<point>` in the environment of a run (the driver, the JVM and the Python workers
all inherit it) makes the process that reaches the point SIGKILL the whole run: the CLI's
process group (the CLI and its JVM) and its own (PySpark's worker daemon makes a group of its
own), as on a power loss or an OOM kill. `SEGPIPE_FAULT=<point>:SIGTERM` (or `:SIGINT`) sends that
signal to the driver's process alone instead, as a scheduler stopping the task or an operator's
Ctrl-C would, at a moment a test names rather than after a sleep (`:SIGSTOP` pauses it there).
Unset, a fault point costs one dictionary lookup. The points are named where a job places them.
"""

from __future__ import annotations

import os
import signal

ENV = "SEGPIPE_FAULT"
GROUP_ENV = "SEGPIPE_FAULT_GROUP"  # the process group of the run's driver
DRIVER_ENV = "SEGPIPE_FAULT_DRIVER"  # the driver's process id (where a stop signal goes)
# SIGSTOP pauses the driver there, for a test to act on a run at that very point (resumed by SIGCONT).
STOP_SIGNALS = {"SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT, "SIGSTOP": signal.SIGSTOP}


def arm() -> None:
    """Called by the driver before Spark starts: its workers learn which group to kill and which
    process to stop."""
    if ENV in os.environ:
        os.environ.setdefault(GROUP_ENV, str(os.getpgrp()))
        os.environ.setdefault(DRIVER_ENV, str(os.getpid()))


def fault_point(name: str) -> None:
    armed = os.environ.get(ENV)
    if armed is None or armed.partition(":")[0] != name:
        return
    stop = STOP_SIGNALS.get(armed.partition(":")[2])
    if stop is not None:
        driver = int(os.environ.get(DRIVER_ENV, os.getpid()))
        if driver == os.getpid():
            signal.raise_signal(stop)  # to this very thread: taken before the next step, every time
        else:
            os.kill(driver, stop)
        return
    own = os.getpgrp()
    driver = int(os.environ.get(GROUP_ENV, own))
    if driver != own:
        os.killpg(driver, signal.SIGKILL)
    os.killpg(own, signal.SIGKILL)


def is_armed(name: str) -> bool:
    """For the points that break output instead of killing the run (a gate's tests)."""
    return os.environ.get(ENV) == name
