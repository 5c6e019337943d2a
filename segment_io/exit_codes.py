"""The exit codes of the command line, in one table: each error type names its code from here,
and `segpipe --help` and the README's table are made from (or checked against) `MEANINGS`.
65, 74 and 75 are sysexits' EX_DATAERR, EX_IOERR and EX_TEMPFAIL; 130 and 143 the shell's for
a process stopped by SIGINT and SIGTERM."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    INVALID = 1
    REFUSED = 2
    SKIPPED = 3
    VALIDATION = 4
    DATA = 65
    IO = 74
    CONFLICT = 75
    INTERNAL = 70
    INTERRUPTED = 130
    TERMINATED = 143


MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "success",
    ExitCode.INVALID: "a check found the data invalid (`inspect`)",
    ExitCode.REFUSED: "refused before any work: arguments, configuration, paths, destination, credentials",
    ExitCode.SKIPPED: "finished, with partitions skipped for bad data (`--on-corrupt=skip-partition`; "
    "published without them), or left as they were by a safety check (`erase --in-place --kafka-tier`)",
    ExitCode.VALIDATION: "the output failed its validation (`clean --validate`, `erase --validate`; nothing "
    "published, the Data Docs kept; `erase --in-place --kafka-tier`: that segment not swapped)",
    ExitCode.DATA: "bad data stopped the run (file and byte named; nothing published)",
    ExitCode.IO: "the remote tier could not be written (after retries; the object and cause named; nothing "
    "committed)",
    ExitCode.CONFLICT: "another writer committed the remote manifest first (nothing changed; run again)",
    ExitCode.INTERNAL: "internal error (a bug; `-v` prints the traceback; nothing published)",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C, SIGINT; the last line names what was published before the "
    "stop)",
    ExitCode.TERMINATED: "terminated (SIGTERM; the last line names what was published before the stop)",
}


def exit_code_table() -> list[str]:
    """The table as the README's Markdown rows."""
    return ["| code | meaning |", "|---|---|", *(f"| {int(c)} | {m} |" for c, m in MEANINGS.items())]
