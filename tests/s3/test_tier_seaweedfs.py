"""The end-to-end tier tests against SeaweedFS, a real object store (its own S3 gateway, data on
disk): tier, restore and `dump --remote`, in-place clean, and runs killed mid-upload, before the
commit, mid-release and in the middle of an in-place clean."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from segment_io.exit_codes import ExitCode
from segment_io.remote.tier import RemoteTier
from tests.helpers import run_segpipe
from tests.s3.test_tier_s3 import (
    RELEASE,
    bucket,
    in_place_clean_equals_a_local_clean,
    killed_run_is_finished_by_the_next,
    tier_reads_and_restores_as_the_original,
    tree,
)

pytestmark = pytest.mark.s3


@pytest.fixture(scope="module")
def store(seaweed_env: dict[str, str]) -> Iterator[dict[str, str]]:
    yield seaweed_env


def test_tier_restore_and_dump_on_seaweedfs(store: dict[str, str], sample_dir: Path, tmp_path: Path) -> None:
    tier_reads_and_restores_as_the_original(store, sample_dir, tmp_path)


def test_in_place_clean_on_seaweedfs(store: dict[str, str], sample_dir: Path, tmp_path: Path) -> None:
    in_place_clean_equals_a_local_clean(store, sample_dir, tmp_path)


@pytest.mark.parametrize("fault", ["mid-upload", "after-upload", "mid-release"])
def test_a_killed_tier_run_on_seaweedfs_is_finished_by_the_next(
    fault: str, store: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    killed_run_is_finished_by_the_next(fault, store, sample_dir, tmp_path)


@pytest.mark.parametrize("fault", ["in-place-cleaned", "in-place-uploaded"])
def test_a_killed_in_place_clean_changes_nothing_and_the_next_one_finishes(
    fault: str, store: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    import shutil

    remote = bucket(store, f"kill-{fault}")
    log = tmp_path / "log"
    shutil.copytree(sample_dir, log)
    assert run_segpipe("tier", str(log), remote, *RELEASE, env=store).returncode == ExitCode.OK
    tier = RemoteTier.open(remote)
    before = {tp: tier.read(tp) for tp in tier.partitions()}
    rules = ["--set", "cleanup.policy=compact", "--set", "retention.ms=-1", "--master", "local[2]"]
    killed = run_segpipe("clean", remote, "--in-place", *rules, env=store, fault=fault)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert {tp: tier.read(tp) for tp in tier.partitions()} == before  # nothing committed
    again = run_segpipe("clean", remote, "--in-place", *rules, env=store)
    assert again.returncode == ExitCode.OK, again.stderr[-3000:]
    assert "did not commit" in again.stdout + again.stderr or fault == "in-place-cleaned"
    for tp in tier.partitions():
        assert tier.read(tp).version == before[tp].version + 1
        tier.check_objects(tier.read(tp))
    restored = tmp_path / "restored"
    assert (
        run_segpipe("restore", remote, str(restored), "--master", "local[2]", env=store).returncode
        == ExitCode.OK
    )
    assert tree(restored)
