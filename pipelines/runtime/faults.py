"""Named points where a run can be made to die for real, to test what a crash leaves behind.

`SEGPIPE_FAULT=<point>` in the environment of a run (the driver, the JVM and the Python workers
all inherit it) makes the process that reaches the point SIGKILL the whole run: the CLI's
process group (the CLI and its JVM) and its own (PySpark's worker daemon makes a group of its
own), as on a power loss or an OOM kill. `SEGPIPE_FAULT=<point>:SIGTERM` (or `:SIGINT`) sends that
signal to the driver's process alone instead, as a scheduler stopping the task or an operator's
Ctrl-C would, at a moment a test names rather than after a sleep (`:SIGSTOP` pauses it there).
Unset, a fault point costs one dictionary lookup. `FAULT_POINTS` is the one table of the points
(a test holds it to the code that places them and the tests that arm them).
"""

from __future__ import annotations

import os
import signal

ENV = "SEGPIPE_FAULT"
GROUP_ENV = "SEGPIPE_FAULT_GROUP"  # the process group of the run's driver
DRIVER_ENV = "SEGPIPE_FAULT_DRIVER"  # the driver's process id (where a stop signal goes)
# SIGSTOP pauses the driver there, for a test to act on a run at that very point (resumed by SIGCONT).
STOP_SIGNALS = {"SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT, "SIGSTOP": signal.SIGSTOP}

# Every point, by name: where a run reaches it.
FAULT_POINTS: dict[str, str] = {
    "before-spark": "a command's refusals done, nothing written, no Spark and no run handlers yet",
    "after-scan": "the scan stage done, nothing staged",
    "after-keymap": "a compaction's key map built (every block of its groups arrived)",
    "mid-rewrite": "a segment half written by a worker (clean, erase, cut)",
    "before-publish": "the output staged whole, not yet published",
    "mid-publish": "inside the publication (a stop signal is held until it ends)",
    "after-publish": "the output published, the run not yet ended",
    "corrupt-output": "not a kill: clean flips the last byte of its first staged .log (a gate's tests)",
    "in-place-cleaned": "clean --in-place: the cleaned segments written, none uploaded",
    "in-place-erased": "erase --in-place: the erased segments written, none uploaded",
    "in-place-uploaded": "an in-place run's segments uploaded, no manifest version committed",
    "mid-commit": "an in-place run: one partition's new version committed, the others not yet",
    "before-upload": "tier: the plan made, nothing uploaded",
    "mid-upload": "tier: after one object's upload, before the next",
    "after-upload": "tier: every object uploaded, no manifest version committed",
    "after-commit": "tier: the manifest versions committed, no local segment released",
    "mid-release": "tier: between two local segments' releases",
    "mid-expire": "tier --expire: between two removals",
    "mid-restore-kafka": "restore-kafka: inside the replacement of the broker's partitions",
    # A swap of a served segment (erase --in-place --kafka-tier), step by step:
    "kafka-tier-copy-started": "a swap journalled, its successor's COPY_SEGMENT_STARTED sent, none uploaded",
    "kafka-tier-uploaded": "a successor's objects uploaded and read back, not yet served",
    "kafka-tier-copy-finished": "a successor's COPY_SEGMENT_FINISHED sent (served), the old segment kept",
    "kafka-tier-delete-started": "the old segment's DELETE_SEGMENT_STARTED sent, its objects not yet gone",
    "kafka-tier-compacted": "a tier's remote segments compacted and proved in its staging, no swap begun",
    "after-step-<step>": "segpipe run: a job file's step recorded done, the next not started",
}


def known_point(name: str) -> bool:
    """Whether `name` is a point of the table (`after-step-<step>` for any step)."""
    return name in FAULT_POINTS or (name.startswith("after-step-") and len(name) > len("after-step-"))


def arm() -> None:
    """Called by the driver before Spark starts: its workers learn which group to kill and which
    process to stop."""
    if ENV in os.environ:
        os.environ.setdefault(GROUP_ENV, str(os.getpgrp()))
        os.environ.setdefault(DRIVER_ENV, str(os.getpid()))


def fault_point(name: str) -> None:
    assert known_point(name), f"fault point {name!r} is not in FAULT_POINTS"
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
    assert known_point(name), f"fault point {name!r} is not in FAULT_POINTS"
    return os.environ.get(ENV) == name
