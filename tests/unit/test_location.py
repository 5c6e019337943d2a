"""A Location names a place by URL and opens it once; a request holds its places as Locations, and a
run reads each of them through the one storage it opened."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import pytest

import segment_io.storage.location as location_module
from pipelines import clean
from pipelines.config import JobConfig
from pipelines.jobs.clean.request import CleanRequest
from pipelines.jobs.tier.request import RestoreRequest, TierRequest
from pipelines.jobs.validate import ValidateRequest
from pipelines.runtime.session import LazySpark
from segment_io.storage import LocalStorage, Location, ObjectStorage

pytestmark = pytest.mark.unit
NOW = 1_700_697_600_000


def test_a_location_is_opened_once_on_first_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    original = location_module.open_storage

    def counting(url: str) -> tuple[object, str]:
        opened.append(url)
        return original(url)

    monkeypatch.setattr(location_module, "open_storage", counting)
    at = Location(str(tmp_path))
    assert opened == []  # named, not opened: a request names its places before its refusals run
    assert isinstance(at.storage, LocalStorage) and at.path == str(tmp_path)
    assert at.storage is at.storage and at.near and at.exists()
    assert opened == [str(tmp_path)]
    child = at.child("orders-0")
    assert child.storage is at.storage and child.path == str(tmp_path / "orders-0")
    assert opened == [str(tmp_path)]  # a child shares its parent's opened storage


def test_a_location_travels_as_its_url_and_compares_by_it() -> None:
    at = Location("memory://bucket/logs")
    assert isinstance(at.storage, ObjectStorage)
    again = pickle.loads(pickle.dumps(at))
    assert again == at and again.url == "memory://bucket/logs" and str(again) == at.url
    assert "_opened" not in again.__dict__  # a worker opens its own
    assert again.path == at.path == "/bucket/logs"
    assert Location.of(at) is at and Location.of("x") == Location("x")
    assert Location.of_optional(None) is None and Location.of_optional("") is None


def test_requests_built_from_urls_hold_locations(tmp_path: Path) -> None:
    request = CleanRequest(src=str(tmp_path / "a"), dst=str(tmp_path / "b"), report_path=str(tmp_path / "r"))
    assert request.src == Location(str(tmp_path / "a")) and request.dst == Location(str(tmp_path / "b"))
    assert request.report_path == Location(str(tmp_path / "r"))
    tier = TierRequest(log_dir="logs", remote="memory://bucket/tier")
    assert tier.log_dir == Location("logs") and tier.remote == Location("memory://bucket/tier")
    restore = RestoreRequest(remote="memory://bucket/tier", dst="out")
    assert restore.local is None and restore.view.url.startswith("tiered:")
    assert restore.view is restore.view  # the view its refusals open is the one the run reads
    check = ValidateRequest(path=str(tmp_path), against=str(tmp_path))
    assert check.log is check.path and check.source == check.against  # plain directories: themselves


def test_a_clean_opens_its_source_and_destination_once(
    sample_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every check, stage, task and report of a run in the driver reads SRC, DST and the report
    through the storage its request opened: each URL is opened exactly once."""
    opened: list[str] = []
    original = location_module.open_storage

    def counting(url: str) -> tuple[object, str]:
        opened.append(url)
        return original(url)

    for module in list(sys.modules.values()):  # also where it was imported by name
        if getattr(module, "open_storage", None) is original:
            monkeypatch.setattr(module, "open_storage", counting)

    def no_spark() -> None:
        raise AssertionError("a small local clean needs no Spark")

    src, dst, report = str(sample_dir), str(tmp_path / "out"), str(tmp_path / "report.json")
    config = JobConfig.build({"cleanup.policy": "compact"})
    result = clean(LazySpark(no_spark), src, dst, config, now_ms=NOW, report_path=report, log=lambda _: None)
    assert result.total("records_out") < result.total("records_in")  # it compacted
    assert (opened.count(src), opened.count(dst), opened.count(report)) == (1, 1, 1)
    assert set(opened) <= {src, dst, report, str(tmp_path / "report.html")}
