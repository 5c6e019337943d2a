"""`clean --in-place` of a remote tier: the same records and bytes as `clean` of the same data on a
local disk, committed as one new manifest version; a writer that committed in between wins and
the run changes nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import pipelines.output.remote_commit as remote_commit
from pipelines import clean
from pipelines.config import JobConfig
from pipelines.jobs.clean.in_place import clean_in_place
from pipelines.jobs.clean.request import CleanRequest
from pipelines.jobs.tier import tier
from pipelines.jobs.tier.restore import restore
from segment_io.errors import ManifestConflict
from segment_io.layout import META_DIR
from segment_io.remote.tier import RemoteTier
from tests.conftest import FIXED_NOW_MS
from tests.helpers import read_log
from tests.spark.test_tier import files_of, quiet

pytestmark = pytest.mark.spark
COMPACT = {"retention.ms": -1, "cleanup.policy": "compact", "delete.retention.ms": 0}


def tiered(spark, sample_dir: Path, tmp_path: Path) -> str:  # type: ignore[no-untyped-def]
    log = tmp_path / "log"
    shutil.copytree(sample_dir, log)
    remote = str(tmp_path / "remote")
    values = {**COMPACT, "local.retention.ms": 0}
    tier(spark, str(log), remote, JobConfig.build(values), now_ms=FIXED_NOW_MS, log=quiet)
    return remote


def test_in_place_equals_a_local_clean_of_the_same_data(spark, sample_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    remote = tiered(spark, sample_dir, tmp_path)
    # The reference: the remote tier written out, then cleaned locally (sealed: no active segment).
    restore(spark, remote, str(tmp_path / "copy"), log=quiet)
    sealed = JobConfig.build({**COMPACT, "segpipe.last.segment.sealed": True})
    clean(spark, str(tmp_path / "copy"), str(tmp_path / "reference"), sealed, now_ms=FIXED_NOW_MS, log=quiet)

    old = {tp: RemoteTier.open(remote).read(tp) for tp in RemoteTier.open(remote).partitions()}
    report = clean_in_place(
        spark, CleanRequest(src=remote, config=JobConfig.build(COMPACT), now_ms=FIXED_NOW_MS), quiet
    )
    assert report.total("removed_superseded") > 0
    tier_ = RemoteTier.open(remote)
    for tp, before in old.items():
        after = tier_.read(tp)
        assert after.version == before.version + 1 and after.note == "clean"
        assert after.next_offset == before.next_offset  # the remote log still ends where it did
        tier_.check_objects(after)
        # The old objects are still there (readers of the old version), until expiry.
        assert before.object_names <= {f.name for f in tier_.segment_objects(tp)}
    assert not (Path(remote) / META_DIR).exists() or not any((Path(remote) / META_DIR).iterdir())
    restore(spark, remote, str(tmp_path / "after"), log=quiet)
    for part in ("orders-0", "orders-1", "clicks-0", "legacy-users-0"):
        assert read_log(tmp_path / "after", part) == read_log(tmp_path / "reference", part), part
    assert files_of(tmp_path / "after") == files_of(tmp_path / "reference")


def test_a_writer_that_committed_first_wins(spark, sample_dir: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    remote = tiered(spark, sample_dir, tmp_path)
    tier_ = RemoteTier.open(remote)
    before = {tp: tier_.read(tp) for tp in tier_.partitions()}
    real_upload_all = remote_commit.upload_all

    def upload_then_another_writer_commits(*args, **kwargs):  # type: ignore[no-untyped-def]
        result = real_upload_all(*args, **kwargs)
        for manifest in before.values():
            tier_.commit(manifest.successor(FIXED_NOW_MS, note="the other writer"))
        return result

    monkeypatch.setattr(remote_commit, "upload_all", upload_then_another_writer_commits)
    with pytest.raises(ManifestConflict):
        clean_in_place(
            spark, CleanRequest(src=remote, config=JobConfig.build(COMPACT), now_ms=FIXED_NOW_MS), quiet
        )
    for tp, manifest in before.items():
        newest = tier_.read(tp)
        assert newest.note == "the other writer" and newest.segments == manifest.segments
    assert not any((Path(remote) / META_DIR).rglob("*.log"))  # the staging went too
