"""How segpipe runs, not what it keeps: the tuning settings, one table (`TUNING`) of their names,
the environment variables that set them, types, defaults and meanings. It feeds the readers
below, `segpipe config describe --tuning` and the README's table. A value that does not parse is
refused before any work, naming its variable."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipelines.errors import ConfigError

DRIVER_WORK_MODES = ("on", "processes", "off")


def _choice(*options: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value not in options:
            raise ValueError(f"expected one of {', '.join(options)}")
        return value

    return parse


def _bytes(value: str) -> int:
    if not value.isdigit():
        raise ValueError("expected a number of bytes (0 or more)")
    return int(value)


def _text(value: str) -> str:
    if not value.strip():
        raise ValueError("expected a value")
    return value.strip()


@dataclass(frozen=True)
class Tunable:
    """One tuning setting: its name, the environment variable that sets it, its type and default
    as an operator writes them, what it does, and how its text is read."""

    name: str
    env: str
    type: str
    default: str
    doc: str
    parse: Callable[[str], Any]


DRIVER_WORK = Tunable(
    name="driver.work",
    env="SEGPIPE_DRIVER_WORK",
    type="on, processes or off",
    default="on",
    doc="where work over a local master's files runs: on, the driver's threads when it is small (the "
    "scan and plan of a near log, copies, a compaction up to 64 MiB), else the driver's processes; "
    "processes, the driver's processes however small; off, Spark tasks whatever the size (a driver "
    "kept light on a shared host)",
    parse=_choice(*DRIVER_WORK_MODES),
)
KEY_BROADCAST = Tunable(
    name="key.broadcast.bytes",
    env="SEGPIPE_KEY_BROADCAST_BYTES",
    type="bytes ≥ 0",
    default=str(32 * 2**20),
    doc="a key list up to this size is read whole and handed to every task; a larger one is joined "
    "with the records' keys (0: every list is joined)",
    parse=_bytes,
)
MASTER = Tunable(
    name="spark.master",
    env="SEGPIPE_MASTER",
    type="Spark master URL",
    default="local[*]",
    doc="the master of a run that names none (--master, spark.master and spark-submit's own win)",
    parse=_text,
)
TUNING: tuple[Tunable, ...] = (DRIVER_WORK, KEY_BROADCAST, MASTER)


def tuned(setting: Tunable) -> Any:
    """The setting's value: its environment variable's, read as its type, else its default."""
    value = os.environ.get(setting.env)
    try:
        return setting.parse(setting.default if value is None else value)
    except ValueError as exc:
        raise ConfigError(f"{setting.env}={value!r}: {exc}") from exc


def describe_tuning() -> list[dict[str, str]]:
    """Every tuning setting: name, variable, type, default, meaning."""
    return [
        {"name": t.name, "env": t.env, "type": t.type, "default": t.default, "doc": t.doc} for t in TUNING
    ]


def tuning_table() -> list[str]:
    """The table as the README's Markdown rows."""
    rows = ["| setting | variable | type | default | meaning |", "|---|---|---|---|---|"]
    return rows + [f"| `{t.name}` | `{t.env}` | {t.type} | {t.default} | {t.doc} |" for t in TUNING]
