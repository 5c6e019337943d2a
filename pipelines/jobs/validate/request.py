"""ValidateRequest: everything one `validate` run is asked to do, in one frozen, keyword-only
value (as CleanRequest is for `clean`)."""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.config import JobConfig
from pipelines.config.terms import Terms
from pipelines.jobs.validate.user_suites import UserSuite


@dataclass(frozen=True, kw_only=True)
class ValidateRequest:
    """A validation of the log directory `path` (with `remote`, its remote tier: the two as one log).

    `against`: the log `path` was cleaned from; the promise is then judged under `terms`, else
    `config` and `now_ms`, else the terms `path`'s manifest recorded (with none, a ConfigError).
    `suites`: the operator's own, each over the records of the topics it names. `report_dir`:
    where the Data Docs go (None: none written). `staged`: `path` is a run's own output before
    publication (no manifest yet)."""

    path: str
    remote: str | None = None
    report_dir: str | None = None
    against: str | None = None
    now_ms: int | None = None
    config: JobConfig | None = None
    terms: Terms | None = None
    suites: tuple[UserSuite, ...] = ()
    staged: bool = False
