"""Where a run's work goes (runtime.tasks.placement), the one rule of every command line: one
case per clause."""

from __future__ import annotations

import pytest

from pipelines.config.tuning import DRIVER_WORK
from pipelines.runtime.tasks import DRIVER_BYTES, DRIVER_COMPACT_BYTES, placement

pytestmark = pytest.mark.unit
SMALL, LOCAL = 1000, 2


@pytest.fixture(autouse=True)
def default_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DRIVER_WORK.env, raising=False)


def test_a_small_near_log_stays_in_the_drivers_threads() -> None:
    assert placement(True, SMALL, True, LOCAL) == (False, False)
    assert placement(True, SMALL, False, None) == (False, False)


def test_a_log_not_near_goes_to_the_processes_of_a_local_master_else_to_spark() -> None:
    assert placement(False, SMALL, False, LOCAL) == (False, True)
    assert placement(False, SMALL, False, None) == (True, False)


def test_a_rewrite_leaves_the_threads_past_the_compaction_limit_a_read_past_the_driver_limit() -> None:
    assert placement(True, DRIVER_COMPACT_BYTES + 1, True, None) == (True, False)
    assert placement(True, DRIVER_COMPACT_BYTES + 1, False, None) == (False, False)
    assert placement(True, DRIVER_BYTES + 1, False, LOCAL) == (False, True)


@pytest.mark.parametrize(
    ("mode", "rewrite", "read"),
    [("processes", (False, True), (False, False)), ("off", (False, True), (False, True))],
)
def test_driver_work_moves_small_work_out_of_the_threads(
    monkeypatch: pytest.MonkeyPatch, mode: str, rewrite: tuple[bool, bool], read: tuple[bool, bool]
) -> None:
    monkeypatch.setenv(DRIVER_WORK.env, mode)
    assert placement(True, SMALL, True, LOCAL) == rewrite
    assert placement(True, SMALL, False, LOCAL) == read
