"""A running Kafka broker holds an exclusive lock on `LOG_DIR/.lock` (a POSIX record lock, what
Java's `FileChannel.tryLock` takes on Linux) for as long as it runs. Whatever changes a local log
directory in place takes that lock itself first: it fails while a broker runs, and a broker that
starts meanwhile fails to take it and stops."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

from segment_io.errors import SegpipeError
from segment_io.exit_codes import ExitCode
from segment_io.layout import LOCK_FILE, is_partition_dir
from segment_io.storage import LocalStorage, Storage


class BrokerRunning(SegpipeError):
    """A Kafka broker holds the log directory: nothing was changed."""

    exit_code = ExitCode.REFUSED


def _lock_files(storage: Storage, path: str) -> list[str]:
    """The `.lock` of the log directory `path` is (or, for a partition directory, lies in)."""
    dirs = [path, os.path.dirname(path)] if is_partition_dir(storage, path) else [path]
    return [f for f in (os.path.join(d, LOCK_FILE) for d in dirs) if os.path.isfile(f)]


@contextlib.contextmanager
def broker_stopped(storage: Storage, path: str, action: str) -> Iterator[None]:
    """Hold the log directory's `.lock` for the block; BrokerRunning when a broker holds it.
    Object stores have no broker, and a directory without a `.lock` has never had a running one."""
    if not isinstance(storage, LocalStorage):
        yield
        return
    with contextlib.ExitStack() as held:
        for lock in _lock_files(storage, path):
            handle = held.enter_context(open(lock, "a"))
            try:
                fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise BrokerRunning(
                    f"{action} refused: a Kafka broker is running on {os.path.dirname(lock)} "
                    f"(it holds {LOCK_FILE}); stop it first. Nothing was changed"
                ) from None
            held.callback(fcntl.lockf, handle, fcntl.LOCK_UN)
        yield
