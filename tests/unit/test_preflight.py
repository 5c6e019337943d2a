"""A request's refusals run once a run: where a command line ran them before Spark starts
(preflight), the job takes its word; a request handed over unchecked is checked by the job."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pipelines.errors import DestinationExists, DestinationInsideSource
from pipelines.jobs.clean.request import CleanRequest
from pipelines.jobs.cut.request import CutRequest
from pipelines.jobs.erase.request import EraseRequest
from pipelines.jobs.tier.request import RestoreRequest, TierRequest
from pipelines.output.harness import Checked, checked, preflight

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class Counted:
    """A request that counts how often its refusals run."""

    runs: list[int] = field(default_factory=list)

    def refusals(self) -> None:
        self.runs.append(1)


def test_refusals_run_once_whether_or_not_a_caller_ran_them() -> None:
    request = Counted()
    ready = preflight(request)
    assert isinstance(ready, Checked) and checked(ready) is request and len(request.runs) == 1
    plain = Counted()
    assert checked(plain) is plain and len(plain.runs) == 1


def test_each_jobs_request_refuses_what_its_run_would(tmp_path: Path) -> None:
    src = tmp_path / "logs"
    (src / "orders-0").mkdir(parents=True)
    inside, report = str(src / "out"), tmp_path / "report.json"
    report.write_text("{}")
    for request in [
        CleanRequest(src=str(src), dst=inside),
        EraseRequest(src=str(src), dst=inside, keys="k.txt"),
        CutRequest(src=str(src), dst=inside, until_offset=0),
    ]:
        with pytest.raises(DestinationInsideSource):
            preflight(request)
    outside = str(tmp_path / "out")
    for request in [
        CleanRequest(src=str(src), dst=outside, report_path=str(report)),
        EraseRequest(src=str(src), dst=outside, keys="k.txt", report_path=str(report)),
        CutRequest(src=str(src), dst=outside, until_offset=0, report_path=str(report)),
        TierRequest(log_dir=str(src), remote="memory://bucket/tier", report_path=str(report)),
    ]:
        with pytest.raises(DestinationExists):
            preflight(request)
    # A clean also writes a page beside its report: that must be new too.
    (tmp_path / "fresh.html").write_text("")
    with pytest.raises(DestinationExists, match=r"fresh\.html"):
        preflight(CleanRequest(src=str(src), dst=outside, report_path=str(tmp_path / "fresh.json")))
    from segment_io.errors import NotALogDirectory

    with pytest.raises(NotALogDirectory):  # a restore reads only a remote tier
        preflight(RestoreRequest(remote=str(src), dst=outside))
