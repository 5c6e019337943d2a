"""ValidateRequest: everything one `validate` run is asked to do, in one frozen, keyword-only
value (as CleanRequest is for `clean`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from pipelines.config import JobConfig
from pipelines.config.terms import Terms
from pipelines.jobs.validate.allowed import promise_terms
from pipelines.jobs.validate.cut_promise import is_cut
from pipelines.jobs.validate.user_suites import UserSuite
from pipelines.output.staging import published_manifest
from segment_io.layout import list_log_dir
from segment_io.remote.view import log_location
from segment_io.storage import Location
from segment_io.storage.location import locate


@dataclass(frozen=True, kw_only=True)
class ValidateRequest:
    """A validation of the log directory `path` (with `remote`, its remote tier: the two as one log).

    `against`: the log `path` was cleaned from; the promise is then judged under `terms`, else
    `config` and `now_ms`, else the terms `path`'s manifest recorded (with none, a ConfigError).
    `suites`: the operator's own, each over the records of the topics it names. `report_dir`:
    where the Data Docs go (None: none written). `staged`: `path` is a run's own output before
    publication (no manifest yet)."""

    path: Location
    remote: Location | None = None
    report_dir: str | None = None
    against: Location | None = None
    now_ms: int | None = None
    config: JobConfig | None = None
    terms: Terms | None = None
    suites: tuple[UserSuite, ...] = ()
    staged: bool = False

    def __post_init__(self) -> None:
        locate(self, "path", "remote", "against")

    @cached_property
    def log(self) -> Location:
        """What is validated: `path`, with `remote` the two tiers as one log, or, where `path` is a
        remote tier, that tier alone; opened once for the refusals and the run."""

        return log_location(self.path, self.remote)

    @cached_property
    def source(self) -> Location | None:
        """`against` as a log (a remote tier read as one), opened once; None without it."""

        return None if self.against is None else log_location(self.against)

    def refusals(self) -> None:
        """A missing or misnamed PATH; a promise whose terms are neither given nor recorded in
        PATH's manifest."""

        list_log_dir(self.log.storage, self.log.path, allow_incomplete=self.staged)
        if self.against is not None and self.terms is None:
            manifest = None if self.staged else published_manifest(self.log)
            if not is_cut(manifest):  # a cut's terms are its manifest's offset or time
                promise_terms(self.path.url, manifest, self.config, self.now_ms)
