"""CleanRequest: everything one `clean` run is asked to do, in one frozen, keyword-only value.
The command line, `segpipe run`, the DAGs and the Python API build one; the job reads only it
(an option is added here, where it is checked, and where it is used)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pipelines.config import JobConfig
from pipelines.errors import ConfigError
from pipelines.log.scanned import ON_CORRUPT
from pipelines.output.destination import require_destination, require_linkable, require_new_file
from pipelines.output.report_html import html_path
from segment_io.storage import Location, Place
from segment_io.storage.location import locate

SELECT = ("all", "kafka")


@dataclass(frozen=True, kw_only=True)
class CleanRequest:
    """A clean of the log directory `src` into `dst` (absent or empty); in place (jobs/clean/in_place.py),
    `src` is a remote tier and there is no `dst`.

        `now_ms`: the "now" of every time rule (None: the clock at the start of the run).
        `on_corrupt="skip-partition"`: a partition whose data is bad is left out of `dst` whole and
        named in the report, instead of stopping the run. `topics`: a predicate on topic names (such
        as a TopicSelection); only those topics' partitions reach `dst` (None: all). `link`: segments
        carried over unchanged are hard-linked, not copied (local, one file system). `select="kafka"`:
        only the partitions Kafka's cleaner would choose now are compacted. `plan_json`: a dry run
        prints its plan as JSON."""

    src: Location
    dst: Location | None = None  # None: a clean in place, whose run writes into its tier's staging
    config: JobConfig = field(default_factory=JobConfig)
    now_ms: int | None = None
    dry_run: bool = False
    report_path: Location | None = None
    on_corrupt: str = "fail"
    plan_json: bool = False
    topics: Callable[[str], bool] | None = None
    link: bool = False
    select: str = "all"

    def __post_init__(self) -> None:
        locate(self, "src", "dst", "report_path")
        if self.select not in SELECT:
            raise ConfigError(f"select {self.select!r}: expected one of {', '.join(SELECT)}")
        if self.on_corrupt not in ON_CORRUPT:
            raise ConfigError(f"on_corrupt {self.on_corrupt!r}: expected one of {', '.join(ON_CORRUPT)}")

    @property
    def out(self) -> Location:
        """Where the cleaned log is written: DST, or the staging an in-place run gives its clean."""
        if self.dst is None:
            raise ConfigError("clean needs SRC and DST (or SRC --in-place for a remote tier)")
        return self.dst

    def refusals(self) -> None:
        """What refuses this clean before it reads a byte (a dry run refuses what the run would):
        a destination inside the source or in use, `link` across file systems, a report file
        (or its page) that exists."""

        require_destination(self.src, self.out)
        if self.link:
            require_linkable(self.src, self.out)
        require_new_reports(self.report_path)

    @property
    def select_kafka(self) -> bool:
        return self.select == "kafka"


def require_new_reports(report: Place | None) -> None:
    """A clean's report file, and its page beside it, must not exist yet."""
    if report:
        require_new_file(report)
        require_new_file(html_path(str(report)))
