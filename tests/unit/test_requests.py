"""CleanRequest and TierRequest: one frozen, keyword-only value holds a run's options, and refuses
a value the job has no meaning for before any work."""

from __future__ import annotations

import dataclasses

import pytest

from pipelines.config import JobConfig
from pipelines.errors import ConfigError
from pipelines.jobs.clean.request import CleanRequest
from pipelines.jobs.tier.request import TierRequest

pytestmark = pytest.mark.unit


def test_a_request_is_keyword_only_frozen_and_defaults_as_the_command_line() -> None:
    with pytest.raises(TypeError):
        CleanRequest("src", "dst")  # type: ignore[misc]
    request = CleanRequest(src="src", dst="dst")
    assert request.config == JobConfig() and request.now_ms is None and not request.dry_run
    assert (request.on_corrupt, request.select, request.select_kafka, request.link) == (
        "fail",
        "all",
        False,
        False,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.link = True  # type: ignore[misc]
    assert CleanRequest(src="src", dst="dst", select="kafka").select_kafka


@pytest.mark.parametrize(
    ("field", "value"), [("select", "some"), ("on_corrupt", "skip"), ("on_corrupt", "skip_partition")]
)
def test_a_value_the_job_does_not_know_is_refused(field: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"{field} '{value}': expected one of"):
        CleanRequest(src="src", dst="dst", **{field: value})


def test_a_tier_request_knows_whether_its_now_was_chosen() -> None:
    assert not TierRequest(log_dir="a", remote="b").now_chosen  # the wall clock's
    assert TierRequest(log_dir="a", remote="b", now_ms=5).now_chosen
    assert not TierRequest(log_dir="a", remote="b", now_ms=5, now_given=False).now_chosen  # a job's run time
    with pytest.raises(TypeError):
        TierRequest("a", "b")  # type: ignore[misc]
    with pytest.raises(ConfigError, match="max_bytes_per_second 0: expected a positive rate"):
        TierRequest(log_dir="a", remote="b", max_bytes_per_second=0)


def test_a_clean_without_a_destination_is_refused_unless_in_place() -> None:
    with pytest.raises(ConfigError, match="clean needs SRC and DST"):
        CleanRequest(src="src").refusals()
    from pipelines.jobs.clean.in_place import clean_in_place

    with pytest.raises(ConfigError, match="takes the remote tier alone"):
        clean_in_place(None, CleanRequest(src="memory://tier", dst="memory://elsewhere"))
