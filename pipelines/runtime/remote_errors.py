"""Typed data errors raised inside Spark tasks, recovered on the driver.

A SegmentError raised in a Python worker reaches the driver as a Spark exception whose text holds
the worker's traceback; its last line is `segment_io.errors.<Type>: <message>`. Rebuilding the
typed error there lets the CLI report file and byte position with exit code 2, not a traceback.
"""

from __future__ import annotations

import re

from segment_io import errors

_RAISED = re.compile(r"segment_io\.errors\.(\w+): ([^\n]*)")


def segment_error_in(exc: BaseException) -> errors.SegmentError | None:
    """The SegmentError a failed Spark job carries in its message, if any (the last one wins)."""
    if isinstance(exc, errors.SegmentError):
        return exc
    found = _RAISED.findall(str(exc))
    if not found:
        return None
    name, message = found[-1]
    cls = getattr(errors, name, None)
    if not (isinstance(cls, type) and issubclass(cls, errors.SegmentError)):
        return None
    return cls.from_message(message.strip())
