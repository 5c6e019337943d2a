"""The `now` every time rule of a run uses: epoch milliseconds, given or read from the clock once."""

from __future__ import annotations

from datetime import UTC, datetime

from pipelines.errors import ConfigError
from segment_io.clock import SYSTEM_CLOCK


def clock_ms() -> int:
    """Now by the wall clock (segment_io.clock's, the one every rule is given)."""
    return SYSTEM_CLOCK.now_ms()


# Epoch milliseconds below this (1973-03-03) that are at or after SECONDS_FROM as seconds (2001-09-09)
# can only be epoch seconds: no Kafka record is that old, and a cut or a `now` there would drop every
# record of a log.
MILLIS_FROM = 10**11
SECONDS_FROM = 10**9


def parse_time(text: str, flag: str = "time") -> int:
    """Epoch milliseconds, or an ISO-8601 date or time (UTC unless it names its offset). Refused:
    a negative value (in Kafka's ListOffsets, −1 and −2 are LATEST and EARLIEST, not times) and a
    value that can only be epoch seconds."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        value = int(text)
        if value < 0:
            raise ConfigError(
                f"{flag} {value}: not a time (in Kafka's ListOffsets -1 means the latest offset and -2 "
                "the earliest; a cut there would keep every record or none); give epoch milliseconds "
                "or an ISO-8601 time, or cut with --until-offset"
            )
        if SECONDS_FROM <= value < MILLIS_FROM:
            raise ConfigError(
                f"{flag} {value}: read as epoch milliseconds this is {iso(value)}, before any Kafka "
                f"record; it looks like epoch seconds ({iso(value * 1000)}): give {value * 1000} "
                "or an ISO-8601 time"
            )
        return value
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(
            f"{flag} {text!r}: expected epoch milliseconds or an ISO-8601 time such as 2026-11-23T12:00:00Z"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def time_argument(text: str) -> int:
    """parse_time as an argparse `type`: a bad time is a usage error naming it."""
    import argparse

    try:
        return parse_time(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def iso(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC (what operators read beside the number)."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
