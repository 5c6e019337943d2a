"""TierRequest and RestoreRequest: everything one `tier` or `restore` run is asked to do, each in
one frozen, keyword-only value (as CleanRequest is for `clean`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from pipelines.config import JobConfig
from pipelines.errors import ConfigError
from pipelines.jobs.tier.unerased import require_no_unerased
from pipelines.keys.key_list import read_key_list
from pipelines.output.destination import require_destination, require_new_file, require_outside
from segment_io.layout import TIER_MARKER, list_log_dir
from segment_io.remote.tier import RemoteTier
from segment_io.remote.view import log_location, tiered_url
from segment_io.storage import Location
from segment_io.storage.location import locate

if TYPE_CHECKING:
    from segment_io.kafka_tier.url import KafkaTierSource


@dataclass(frozen=True, kw_only=True)
class TierRequest:
    """A tier of the Kafka log directory `log_dir` into the remote tier at `remote` (created when
    absent).

    `now_ms`: when the retention rules are judged (None: the wall clock at the start of the run).
    `now_given`: whether the operator chose that `now` (None: whether `now_ms` is given); retention
    under Kafka's default configs is refused at a `now` nobody chose. `max_bytes_per_second`: the
    uploads' rate limit (None: none). `new_history`: a log that is not the remote tier's (a
    re-created topic) starts the partition's remote history anew. `plan_json`: a dry run prints
    its plan as JSON instead of a table."""

    log_dir: Location
    remote: Location
    config: JobConfig = field(default_factory=JobConfig)
    now_ms: int | None = None
    now_given: bool | None = None
    dry_run: bool = False
    report_path: Location | None = None
    max_bytes_per_second: int | None = None
    new_history: bool = False
    plan_json: bool = False

    def __post_init__(self) -> None:
        locate(self, "log_dir", "remote", "report_path")
        if self.max_bytes_per_second is not None and self.max_bytes_per_second <= 0:
            raise ConfigError(f"max_bytes_per_second {self.max_bytes_per_second}: expected a positive rate")

    def refusals(self) -> None:
        """A report file that exists; a remote tier given as the log directory (the arguments
        swapped); a missing or misnamed log directory; a remote tier inside the log directory, or
        at a place that holds anything but a tier."""

        if self.report_path:
            require_new_file(self.report_path)
        if RemoteTier.is_tier(self.log_dir):
            raise ConfigError(
                f"tier refused: {self.log_dir} is a remote tier ({TIER_MARKER}), not a Kafka log directory; "
                "the order is tier LOG_DIR REMOTE_URL"
            )
        list_log_dir(self.log_dir.storage, self.log_dir.path)
        require_outside(self.log_dir, self.remote, "holds only Kafka's partition directories")
        RemoteTier.require_place(self.remote)

    @property
    def now_chosen(self) -> bool:
        return self.now_ms is not None if self.now_given is None else self.now_given


@dataclass(frozen=True, kw_only=True)
class RestoreRequest:
    """The remote tier at `remote`, and above it the local log directory `local` (None: the
    remote tier alone), written out as one plain Kafka log directory at `dst`. With `kafka_tier`
    (a broker's tiered-storage settings), `remote` is instead a broker's log directory (or a copy
    of its remote log metadata partitions), read with its topics' Kafka remote tier."""

    remote: Location
    dst: Location
    local: Location | None = None
    keys: str | None = None  # the key list of an in-place erase of the tier (see tier/unerased.py)
    key_format: str = "utf8"
    kafka_tier: KafkaTierSource | None = None

    def __post_init__(self) -> None:
        locate(self, "remote", "dst", "local")

    @cached_property
    def view(self) -> Location:
        """The two tiers as one log (what is read), opened once for the refusals and the run."""

        if self.kafka_tier is not None:
            return log_location(self.remote, kafka_tier=self.kafka_tier)
        return Location(tiered_url(self.remote.url, None if self.local is None else self.local.url))

    def refusals(self) -> None:
        """A prefix that is not a remote tier; a local log directory that is a tier, missing or
        misnamed; a destination inside what is read, or in use."""

        if self.kafka_tier is not None:
            if self.local is not None or self.keys is not None:
                raise ConfigError(
                    "restore --kafka-tier reads the broker's log directory itself: no --local, --keys"
                )
            list_log_dir(self.view.storage, self.view.path)
            require_destination(self.view, self.dst)
            return
        RemoteTier.open(self.remote)
        if self.local is not None:
            if RemoteTier.is_tier(self.local):
                raise ConfigError(f"restore refused: the local log directory {self.local} is a remote tier")
            list_log_dir(self.local.storage, self.local.path)

            keys = None if self.keys is None else read_key_list(self.keys, self.key_format)
            require_no_unerased(self.view, self.local, keys)
        elif self.keys is not None:
            raise ConfigError("restore: --keys checks the local log directory's records; give --local")
        require_destination(self.view, self.dst)
