"""The `now` every time rule of a run uses: epoch milliseconds, given or read from the clock once."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from pipelines.errors import ConfigError


def clock_ms() -> int:
    return int(time.time() * 1000)


def parse_time(text: str, flag: str = "time") -> int:
    """Epoch milliseconds, or an ISO-8601 date or time (UTC unless it names its offset)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
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
