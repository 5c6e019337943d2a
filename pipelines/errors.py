"""Every error segpipe raises on purpose descends from one root (`SegpipeError`, defined next to
the data errors in segment_io) and carries the exit code the command line ends with. The table
(also in the README and `segpipe --help`):

    0    success
    1    a check found the data invalid (`inspect`)
    2    refused before any work: arguments, configuration, paths, destination
    3    finished, with partitions skipped for bad data (`clean --on-corrupt=skip-partition`)
    4    a validation gate failed (`clean --validate`; nothing published, the Data Docs kept)
    65   bad data stopped the run (file and byte named; nothing published)
    74   the remote tier could not be written (after retries; the object and cause named)
    75   another writer committed the remote manifest first (nothing changed; run again)
    70   an internal error (a bug: `-v` prints the traceback; nothing published)
    130  interrupted (Ctrl-C, SIGINT; what was published before the stop is named)
    143  terminated (SIGTERM; what was published before the stop is named)
"""

from __future__ import annotations

from segment_io.errors import SegmentError, SegpipeError

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_REFUSED = 2
EXIT_SKIPPED = 3
EXIT_VALIDATION = 4
EXIT_DATA = 65  # sysexits' EX_DATAERR
EXIT_IO = 74  # sysexits' EX_IOERR
EXIT_CONFLICT = 75  # sysexits' EX_TEMPFAIL
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
EXIT_CODES = (
    (EXIT_OK, "success"),
    (EXIT_INVALID, "a check found the data invalid (inspect)"),
    (EXIT_REFUSED, "refused before any work: arguments, configuration, paths, destination"),
    (EXIT_SKIPPED, "finished, with partitions skipped for bad data (published without them)"),
    (EXIT_VALIDATION, "the output failed its validation (clean or erase --validate; nothing published)"),
    (EXIT_DATA, "bad data stopped the run (file and byte named; nothing published)"),
    (EXIT_IO, "the remote tier could not be written (object and cause named; nothing committed)"),
    (EXIT_CONFLICT, "another writer committed the remote manifest first (nothing changed; run again)"),
    (EXIT_INTERNAL, "internal error (-v prints the traceback; nothing published)"),
    (EXIT_INTERRUPTED, "interrupted: SIGINT, Ctrl-C (the last line names what was published)"),
    (EXIT_TERMINATED, "terminated: SIGTERM, a scheduler's time-out (the last line names what was published)"),
)

__all__ = [
    "EXIT_CODES",
    "EXIT_CONFLICT",
    "EXIT_DATA",
    "EXIT_IO",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "EXIT_VALIDATION",
    "EXIT_INVALID",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_SKIPPED",
    "ConfigError",
    "DestinationExists",
    "DestinationInsideSource",
    "DestinationNotEmpty",
    "DestinationRefused",
    "RunInProgress",
    "SegmentError",
    "SegpipeError",
    "Terminated",
    "ValidationFailed",
]


class ConfigError(SegpipeError):
    """A configuration name or value, or a command-line argument, that segpipe refuses (raised
    before any work starts)."""

    exit_code = EXIT_REFUSED


class DestinationRefused(SegpipeError):
    """A destination segpipe will not write: not empty or inside the source (both checked before
    any work starts), or filled by another writer while the run worked (checked at publication)."""

    exit_code = EXIT_REFUSED


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

    exit_code = EXIT_VALIDATION
