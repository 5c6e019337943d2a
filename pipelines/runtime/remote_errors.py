"""Typed errors raised inside Spark tasks, recovered on the driver.

An error raised in a Python worker reaches the driver as a Spark exception whose text holds the
worker's traceback; its last line is `segment_io.errors.<Type>: <message>`. Rebuilding the typed
error there lets the CLI report it (file and byte position, or the object and cause of a failed
upload) with its own exit code, not as an internal error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from pipelines.errors import ConfigError
from segment_io import errors

_RAISED = re.compile(r"(segment_io|pipelines)\.errors\.(\w+): ([^\n]*)")


def typed_error_in(exc: BaseException) -> errors.SegpipeError | None:
    """The segpipe error a failed Spark job carries in its message, if any (the last one wins)."""
    if isinstance(exc, errors.SegpipeError):
        return exc
    found = _RAISED.findall(str(exc))
    if not found:
        return None
    package, name, message = found[-1]
    if package == "pipelines":  # a run's own refusal found by a task (a key list's bad row)
        return ConfigError(message.strip()) if name == "ConfigError" else None
    cls = getattr(errors, name, None)
    if not isinstance(cls, type):
        return None
    if issubclass(cls, errors.SegmentError):
        return cls.from_message(message.strip())
    if issubclass(cls, errors.UploadFailed):
        return errors.UploadFailed.from_message(message.strip())
    return None


@contextmanager
def typed_errors() -> Iterator[None]:
    """Around a job: an error its Spark tasks raised leaves as the typed segpipe error it was."""
    try:
        yield
    except Exception as exc:
        typed = typed_error_in(exc)
        if typed is None or typed is exc:
            raise
        raise typed from None
