"""CutRequest: everything one `cut` run is asked to do, in one frozen, keyword-only value."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pipelines.errors import ConfigError
from pipelines.log.scanned import ON_CORRUPT
from pipelines.output.destination import require_output
from segment_io.storage import Location
from segment_io.storage.location import locate


@dataclass(frozen=True, kw_only=True)
class CutRequest:
    """A cut of the log directory `src` into `dst` (absent or empty) as Kafka's truncation leaves a
    log: every partition ends before `until_offset`, or before the offset Kafka's ListOffsets gives
    for `until_time` (its first record at or after that time; a partition with none is whole).
    `topics`: a predicate on topic names; only those topics are cut and reach `dst` (None: all)."""

    src: Location
    dst: Location
    until_offset: int | None = None
    until_time: int | None = None
    topics: Callable[[str], bool] | None = None
    dry_run: bool = False
    report_path: Location | None = None
    on_corrupt: str = "fail"

    def __post_init__(self) -> None:
        locate(self, "src", "dst", "report_path")
        if (self.until_offset is None) == (self.until_time is None):
            raise ConfigError("a cut needs exactly one of --until-offset and --until-time")
        if self.until_offset is not None and self.until_offset < 0:
            raise ConfigError(f"--until-offset {self.until_offset}: offsets start at 0")
        if self.on_corrupt not in ON_CORRUPT:
            raise ConfigError(f"on_corrupt {self.on_corrupt!r}: expected one of {', '.join(ON_CORRUPT)}")

    def refusals(self) -> None:
        """A destination inside the source or in use, a report file that exists."""

        require_output(self.src, self.dst, self.report_path)
