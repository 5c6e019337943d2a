"""Every error segpipe raises on purpose descends from one root (`SegpipeError`, defined next to
the data errors in segment_io) and carries the exit code the command line ends with, named in the
one table of exit codes (segment_io/exit_codes.py; also `segpipe --help` and the README)."""

from __future__ import annotations

from segment_io.errors import SegmentError, SegpipeError
from segment_io.exit_codes import ExitCode

__all__ = [
    "ConfigError",
    "DestinationExists",
    "DestinationInsideSource",
    "DestinationNotEmpty",
    "DestinationRefused",
    "PartitionsLeft",
    "RunInProgress",
    "SegmentError",
    "SegpipeError",
    "Terminated",
    "ValidationFailed",
]


class ConfigError(SegpipeError):
    """A configuration name or value, or a command-line argument, that segpipe refuses (raised
    before any work starts)."""

    exit_code = ExitCode.REFUSED


class DestinationRefused(SegpipeError):
    """A destination segpipe will not write: not empty or inside the source (both checked before
    any work starts), or filled by another writer while the run worked (checked at publication)."""

    exit_code = ExitCode.REFUSED


class DestinationNotEmpty(DestinationRefused):
    pass


class DestinationInsideSource(DestinationRefused):
    pass


class DestinationExists(DestinationRefused):
    pass


class RunInProgress(DestinationRefused):
    """Another run, alive or not provably dead, is writing the destination."""


class Terminated(KeyboardInterrupt):
    """SIGTERM: like Ctrl-C, the run stops, cancels its Spark jobs and publishes nothing more (a
    publication under way finishes first)."""


class ValidationFailed(SegpipeError):
    """The staged output broke a validation rule: nothing was published."""

    exit_code = ExitCode.VALIDATION


class PartitionsLeft(SegpipeError):
    """A run finished, with partitions or segments left as they were (named): not all it set out
    to do is done, and a run again may finish it."""

    exit_code = ExitCode.SKIPPED
