"""What changes data in place proves first that it is safe, or refuses (moto's S3 on 127.0.0.1,
the command line as an operator runs it). One test per way a log was lost before: after each,
every record the log held before the command is readable, unchanged."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from segment_io.exit_codes import ExitCode
from segment_io.remote.tier import RemoteTier
from tests.helpers import flip_byte, lock_held, run_segpipe
from tests.s3.test_tier_s3 import bucket, tree

pytestmark = pytest.mark.s3
NOW = "2023-11-26T12:00:00Z"
LOCAL = ["--master", "local[2]"]
RELEASE = ["--set", "retention.ms=-1", "--set", "local.retention.ms=0", "--now", NOW, *LOCAL]


def dump(path: Path | str, env: dict[str, str], remote: str | None = None) -> str:
    proc = run_segpipe("dump", str(path), *(["--remote", remote] if remote else []), env=env)
    assert proc.returncode == ExitCode.OK, proc.stderr[-2000:]
    return proc.stdout


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def remote_state(env: dict[str, str], remote: str) -> dict[str, list[int]]:
    tier = RemoteTier.open(remote)
    return {str(tp): tier.versions(tp) for tp in tier.partitions()}


def log_and_tier(s3_env: dict[str, str], sample_dir: Path, tmp_path: Path, case: str) -> tuple[Path, str]:
    """A copy of the sample log and a fresh remote prefix of its own for one case."""
    log = tmp_path / "log"
    shutil.copytree(sample_dir, log)
    return log, bucket(s3_env, case)


def test_1_segments_merged_since_they_were_tiered_are_uploaded_not_released(
    s3_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    remote = bucket(s3_env, "case1")
    shorter = tmp_path / "shorter"
    shutil.copytree(sample_dir, shorter)
    for log in sorted((shorter / "clicks-0").glob("*.log"))[-3:]:  # clicks was shorter then
        for f in shorter.glob(f"clicks-0/{log.stem}.*"):
            f.unlink()
    ok(
        run_segpipe(
            "tier", str(shorter), remote, "--set", "retention.ms=-1", "--now", NOW, *LOCAL, env=s3_env
        )
    )
    # The whole log, compacted: segments merged across the remote tier's end.
    compacted = tmp_path / "compacted"
    ok(
        run_segpipe(
            "clean",
            str(sample_dir),
            str(compacted),
            "--set",
            "cleanup.policy=compact",
            "--set",
            "retention.ms=-1",
            "--now",
            NOW,
            *LOCAL,
            env=s3_env,
        )
    )
    before = dump(compacted, s3_env)
    out = ok(run_segpipe("tier", str(compacted), remote, *RELEASE, env=s3_env))
    assert "not tiered" not in out
    # Every record of the compacted log is read back from the two tiers, and restored byte for byte.
    assert dump(compacted, s3_env, remote) == before and before.count("\n") > 1000
    restored = tmp_path / "restored"
    ok(run_segpipe("restore", remote, str(restored), "--local", str(compacted), *LOCAL, env=s3_env))
    assert dump(restored, s3_env) == before
    tier = RemoteTier.open(remote)
    clicks = next(tp for tp in tier.partitions() if tp.topic == "clicks")
    assert tier.read(clicks).note == "tier" and tier.read(clicks).segments[0].base_offset == 0


def test_2_another_log_under_the_same_names_is_refused_until_a_new_history_is_asked_for(
    s3_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    first, remote = log_and_tier(s3_env, sample_dir, tmp_path, "case2")
    ok(run_segpipe("tier", str(first), remote, "--set", "retention.ms=-1", "--now", NOW, *LOCAL, env=s3_env))
    other = tmp_path / "other"  # the same topics, re-created: other records at the same offsets
    ok(run_segpipe("generate", str(other), "--seed", "99", "--records", "1500", env=s3_env))
    other_records, other_files = dump(other, s3_env), tree(other)
    versions = remote_state(s3_env, remote)
    refused = run_segpipe("tier", str(other), remote, *RELEASE, env=s3_env)
    assert refused.returncode == ExitCode.REFUSED, refused.stderr[-2000:]
    assert "remote tier's record differs" in refused.stderr and "--new-history" in refused.stderr
    assert "the remote tier holds no topic id, first offset 0" in refused.stderr
    assert tree(other) == other_files and remote_state(s3_env, remote) == versions
    assert dump(first, s3_env, remote) == dump(sample_dir, s3_env)  # the first log, unchanged
    # Asked for: the other log starts a new history, and reads back whole.
    ok(run_segpipe("tier", str(other), remote, *RELEASE, "--new-history", env=s3_env))
    assert dump(other, s3_env, remote) == other_records


def test_3_a_tier_marker_goes_only_where_a_tier_is(
    s3_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    log, remote = log_and_tier(s3_env, sample_dir, tmp_path, "case3")
    ok(run_segpipe("tier", str(log), remote, "--set", "retention.ms=-1", "--now", NOW, *LOCAL, env=s3_env))
    files = tree(log)
    swapped = run_segpipe("tier", remote, str(log), *RELEASE, env=s3_env)
    assert swapped.returncode == ExitCode.REFUSED and "is a remote tier" in swapped.stderr, swapped.stderr
    output = tmp_path / "output"
    ok(run_segpipe("clean", str(sample_dir), str(output), "--set", "retention.ms=-1", "--now", NOW, *LOCAL))
    into_output = run_segpipe("tier", str(log), str(output), *RELEASE, env=s3_env)
    assert (
        into_output.returncode == ExitCode.REFUSED
        and "is not empty and not a remote tier" in into_output.stderr
    )
    assert tree(log) == files and not (output / "segpipe-tier.json").exists()
    # A log directory that a marker was written into is refused by every reader, not read as empty.
    (log / "segpipe-tier.json").write_text("{}")
    for command in (["inspect", str(log)], ["dump", str(log)]):
        proc = run_segpipe(*command)
        assert (
            proc.returncode == ExitCode.REFUSED and "beside Kafka's partition directories" in proc.stderr
        ), proc.stderr


def test_4_expiry_counts_the_grace_period_on_the_wall_clock(
    s3_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    log, remote = log_and_tier(s3_env, sample_dir, tmp_path, "case4")
    ok(run_segpipe("tier", str(log), remote, *RELEASE, env=s3_env))
    ok(
        run_segpipe(
            "clean",
            remote,
            "--in-place",
            "--set",
            "cleanup.policy=compact",
            "--set",
            "retention.ms=-1",
            "--now",
            "2023-11-23",
            *LOCAL,
            env=s3_env,
        )
    )
    tier = RemoteTier.open(remote)
    objects = {str(tp): {f.name for f in tier.segment_objects(tp)} for tp in tier.partitions()}
    out = ok(run_segpipe("tier", "--expire", remote, env=s3_env))
    assert "expired 0 unreferenced objects" in out and "0 old manifest versions" in out
    assert {str(tp): {f.name for f in tier.segment_objects(tp)} for tp in tier.partitions()} == objects
    # Readers of the version before the in-place clean still read all of it.
    for tp in tier.partitions():
        previous = tier.read_version(tp, tier.versions(tp)[-2])
        tier.check_objects(previous)
    assert run_segpipe("tier", "--expire", remote, "--now", NOW, env=s3_env).returncode == ExitCode.REFUSED


def test_5_retention_under_kafkas_defaults_at_the_clock_is_refused(
    s3_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    log, remote = log_and_tier(s3_env, sample_dir, tmp_path, "case5")
    files = tree(log)
    refused = run_segpipe("tier", str(log), remote, *LOCAL, env=s3_env)
    assert refused.returncode == ExitCode.REFUSED and "retention.ms is Kafka's default" in refused.stderr, (
        refused.stderr
    )
    assert "--now" in refused.stderr and tree(log) == files
    assert not RemoteTier.is_tier(remote)  # a refused run leaves the empty place empty
    # Chosen, the same rules empty the archive: said per partition.
    emptied = ok(run_segpipe("tier", str(log), remote, "--now", "2030-01-01", *LOCAL, env=s3_env))
    assert emptied.count("retention removed every segment of") == 4


def test_6_a_running_broker_is_never_touched(
    s3_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    log, remote = log_and_tier(s3_env, sample_dir, tmp_path, "case6")
    (log / ".lock").write_text("")
    files = tree(log)
    with lock_held(log / ".lock"):
        proc = run_segpipe("tier", str(log), remote, *RELEASE, env=s3_env)
        assert proc.returncode == ExitCode.REFUSED and "a Kafka broker is running" in proc.stderr, proc.stderr
        assert tree(log) == files


def test_7_restore_kafka_verifies_the_archive_first(sample_dir: Path, tmp_path: Path) -> None:
    broker = tmp_path / "kafka-logs"
    shutil.copytree(sample_dir, broker)
    (broker / "meta.properties").write_text("node.id=1\n")
    (broker / ".kafka_cleanshutdown").write_text("")
    for part in broker.iterdir():
        if part.is_dir():
            (part / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")
    archive = tmp_path / "archive"
    shutil.copytree(sample_dir, archive)
    log = sorted((archive / "orders-0").glob("*.log"))[1]
    flip_byte(log, 200)
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in broker.rglob("*") if p.is_file()}
    proc = run_segpipe("restore-kafka", str(archive), str(broker), "--backup", str(tmp_path / "backup"))
    assert proc.returncode == ExitCode.DATA, proc.stderr
    assert str(log) in proc.stderr and " at byte " in proc.stderr
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in broker.rglob("*") if p.is_file()} == before
    url = run_segpipe("restore-kafka", "s3://bucket/archive", str(broker))
    assert url.returncode == ExitCode.REFUSED and "s3://bucket/archive" in url.stderr


def test_8_what_is_not_a_log_directory_is_refused(
    s3_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    parent = sample_dir.parent  # a parent folder by mistake
    for command in (
        ["inspect", str(parent)],
        ["dump", str(parent)],
        ["inspect", "/etc"],
        ["validate", str(parent)],
        ["clean", str(parent), str(tmp_path / "out"), "--now", NOW],
    ):
        proc = run_segpipe(*command)
        assert proc.returncode == ExitCode.REFUSED and "is not a Kafka log directory" in proc.stderr, (
            command,
            proc.stderr,
        )
    assert not (tmp_path / "out").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (
        run_segpipe("inspect", str(empty)).returncode == ExitCode.OK
    )  # an empty log directory is a log directory
    # A killed run's object-store output is named as what it is.
    import s3fs

    incomplete = bucket(s3_env, "case8/out")
    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_env["AWS_ENDPOINT_URL"]})
    fs.put(str(sample_dir / "orders-0"), incomplete.removeprefix("s3://") + "/orders-0", recursive=True)
    fs.pipe_file(incomplete.removeprefix("s3://") + "/_segpipe/INCOMPLETE", b"run\n")
    proc = run_segpipe("inspect", incomplete, env=s3_env)
    assert proc.returncode == ExitCode.REFUSED and "did not finish" in proc.stderr, proc.stderr


def test_a_missing_bucket_is_named_when_the_store_answers_with_an_error(s3_env: dict[str, str]) -> None:
    """Some stores answer a request into a missing bucket with an internal error naming nothing."""
    import argparse

    from pipelines.cli.main import _missing_bucket

    bucket(s3_env, "present")
    args = argparse.Namespace(src="s3://segpipe-tests/present", dst="s3://segpipe-no-such-bucket/out", set=[])
    assert _missing_bucket(args) == "the bucket 'segpipe-no-such-bucket' of s3://segpipe-no-such-bucket/out"
    assert _missing_bucket(argparse.Namespace(src="s3://segpipe-tests/x", dst="/tmp/out")) is None
