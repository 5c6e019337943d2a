"""Where `clean` may write: never inside its source, never over anything, not even at publication."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipelines.errors import DestinationInsideSource, DestinationNotEmpty
from pipelines.output.destination import require_destination
from pipelines.output.staging import Staging
from segment_io.remote.view import tiered_url

pytestmark = pytest.mark.unit


def test_a_destination_inside_the_source_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "logs"
    (src / "orders-0").mkdir(parents=True)
    os.symlink(src, tmp_path / "alias")
    for dst in [
        src,
        src / "cleaned",
        src / "orders-0" / "x",
        tmp_path / "alias" / "cleaned",
        f"file://{src}/out",
    ]:
        with pytest.raises(DestinationInsideSource, match="is inside the source"):
            require_destination(str(src), str(dst))
    with pytest.raises(DestinationInsideSource):
        require_destination("memory://bucket/logs", "memory://bucket/logs/out")
    # A tiered source (a log directory and its remote tier read as one) is both of them.
    tiered = tiered_url("memory://bucket/tier", str(src))
    for dst in [str(src / "cleaned"), "memory://bucket/tier/out"]:
        with pytest.raises(DestinationInsideSource, match="is inside the source"):
            require_destination(tiered, dst)
    require_destination(tiered, str(tmp_path / "restored"))
    assert sorted(p.name for p in src.iterdir()) == ["orders-0"]


def test_a_destination_beside_the_source_must_be_empty(tmp_path: Path) -> None:
    src = tmp_path / "logs"
    src.mkdir()
    require_destination(str(src), str(tmp_path / "logs-cleaned"))  # a shared name prefix is not inside
    require_destination("memory://bucket/logs", "memory://bucket/logs2")
    require_destination("memory://bucket/logs", "memory://other/logs/out")
    (tmp_path / "out").mkdir()
    require_destination(str(src), str(tmp_path / "out"))  # empty: fine
    (tmp_path / "out" / "keep").write_text("x")
    with pytest.raises(DestinationNotEmpty):
        require_destination(str(src), str(tmp_path / "out"))


def test_a_destination_filled_during_the_run_is_not_overwritten(tmp_path: Path) -> None:
    dst = tmp_path / "out"
    dst.mkdir()
    staging = Staging.create(str(dst))
    (dst / "other-run").write_text("x")  # another writer got there first
    with pytest.raises(DestinationNotEmpty, match="was filled while this run worked"):
        staging.publish({"run_id": staging.run_id})
    staging.abort()
    assert [p.name for p in tmp_path.iterdir()] == ["out"] and [p.name for p in dst.iterdir()] == [
        "other-run"
    ]


def test_a_stop_while_staging_is_created_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM or Ctrl-C between the staging directory and its lock (a stop signal raises in the
    main thread wherever it is): the half-made staging is removed before the stop goes on."""
    from segment_io.storage.local import LocalStorage

    def stopped(self: LocalStorage, path: str, data: bytes) -> None:
        raise KeyboardInterrupt()

    monkeypatch.setattr(LocalStorage, "write_atomic", stopped)
    with pytest.raises(KeyboardInterrupt):
        Staging.create(str(tmp_path / "dst"))
    assert list(tmp_path.iterdir()) == []
