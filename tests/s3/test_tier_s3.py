"""`tier`, `restore`, `dump --remote` and expiry against a real S3 endpoint (moto's server on
127.0.0.1), and runs killed at every step of `tier`: a re-run finishes the job, every record is in
one tier or both, byte for byte, and no manifest names a missing object."""

from __future__ import annotations

import hashlib
import shutil
import signal
import time
from datetime import datetime
from pathlib import Path

import pytest

from pipelines.config.job import load_job_config
from pipelines.config.tuning import DRIVER_WORK
from pipelines.jobs.clean.in_place import clean_in_place
from pipelines.jobs.clean.request import CleanRequest
from pipelines.jobs.erase.in_place import erase_in_place
from pipelines.jobs.erase.request import EraseRequest
from segment_io.errors import ManifestConflict
from segment_io.exit_codes import ExitCode
from segment_io.layout import META_DIR
from segment_io.remote.tier import RemoteTier
from segment_io.storage import Location
from segment_io.topic_partition import TopicPartition
from tests.helpers import NO_JVM, run_segpipe, spark_jobs_of
from tests.s3.stores import in_session_workers

pytestmark = pytest.mark.s3
NOW = "2023-11-26T12:00:00Z"
NOW_MS = int(datetime.fromisoformat(NOW).timestamp() * 1000)
RELEASE = ["--set", "retention.ms=-1", "--set", "local.retention.ms=0", "--now", NOW, "--master", "local[2]"]


def tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and META_DIR not in p.parts
    }


BUCKET = "segpipe-tests"


def bucket(s3_env: dict[str, str], name: str) -> str:
    """A fresh prefix in the one test bucket (every new bucket costs SeaweedFS new volumes)."""
    import s3fs

    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_env["AWS_ENDPOINT_URL"]})
    if not fs.exists(BUCKET):
        fs.mkdir(BUCKET)
        # A new bucket may take a moment to take writes (SeaweedFS): wait, boundedly, until one works.
        for attempt in range(50):
            try:
                fs.pipe_file(f"{BUCKET}/ready", b"ready")
                break
            except OSError:
                if attempt == 49:
                    raise
                time.sleep(0.2)
    return f"s3://{BUCKET}/{name}"


def check_whole(store_env: dict[str, str], remote: str, log: Path, original: Path, tmp_path: Path) -> None:
    """The two tiers hold the original log: restore gives its bytes, every manifest's objects exist."""
    tier = RemoteTier.open(remote)
    for tp in tier.partitions():
        tier.check_objects(tier.read(tp))
    restored = tmp_path / "restored"
    proc = run_segpipe(
        "restore", remote, str(restored), "--local", str(log), "--master", "local[2]", env=store_env
    )
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    assert tree(restored) == tree(original)


def tier_reads_and_restores_as_the_original(s3_env: dict[str, str], sample_dir: Path, tmp_path: Path) -> None:
    tiered_reads_and_restores(s3_env, bucket(s3_env, "tiered"), sample_dir, tmp_path)


def tiered_reads_and_restores(
    store_env: dict[str, str], remote: str, sample_dir: Path, tmp_path: Path
) -> None:
    """A tier of the samples to `remote` (any store's URL) releases all but the active segments,
    dumps with its remote tier as the original, inspects as valid, and restores byte for byte."""
    log = tmp_path / "log"
    shutil.copytree(sample_dir, log)
    proc = run_segpipe("tier", str(log), remote, *RELEASE, env=store_env)
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    assert "uploaded" in proc.stdout + proc.stderr and "each object read back" in proc.stdout + proc.stderr
    # The local log kept only its active segments; with its remote tier it dumps as the original.
    assert sum(1 for _ in log.rglob("*.log")) == 4
    split = run_segpipe("dump", str(log), "--remote", remote, env=store_env)
    whole = run_segpipe("dump", str(sample_dir))
    assert (
        split.returncode == ExitCode.OK and split.stdout == whole.stdout and whole.stdout.count("\n") > 8000
    )
    inspected = run_segpipe("inspect", remote, env=store_env)
    assert inspected.returncode == ExitCode.OK and "valid" in inspected.stdout
    check_whole(store_env, remote, log, sample_dir, tmp_path)


def test_two_writers_of_one_s3_manifest_cannot_both_commit(s3_env: dict[str, str]) -> None:
    remote = bucket(s3_env, "race")
    one, two = RemoteTier.open(remote, create=True), RemoteTier.open(remote)
    tp = TopicPartition("t", 0)
    base_one, base_two = one.read(tp), two.read(tp)
    one.commit(base_one.successor(1, note="one"))
    with pytest.raises(ManifestConflict):  # the store refuses the second conditional PUT
        two.commit(base_two.successor(2, note="two"))
    assert one.versions(tp) == [1] and one.read(tp).note == "one"


def killed_run_is_finished_by_the_next(
    fault: str, s3_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    remote = bucket(s3_env, f"crash-{fault}")
    log = tmp_path / "log"
    shutil.copytree(sample_dir, log)
    killed = run_segpipe("tier", str(log), remote, *RELEASE, env=s3_env, fault=fault)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    # Whatever the kill left, the log is whole across the two tiers ...
    check_whole(s3_env, remote, log, sample_dir, tmp_path / "after-kill")
    # ... and the next run finishes the job.
    again = run_segpipe("tier", str(log), remote, *RELEASE, env=s3_env)
    assert again.returncode == ExitCode.OK, again.stderr[-3000:]
    assert sum(1 for _ in log.rglob("*.log")) == 4 and not list(log.rglob("*.deleted"))
    check_whole(s3_env, remote, log, sample_dir, tmp_path / "after-rerun")
    # A segment is committed once: no two manifest entries share a base offset or a name.
    tier = RemoteTier.open(remote)
    for tp in tier.partitions():
        segments = tier.read(tp).segments
        assert len({s.base_offset for s in segments}) == len(segments)
    # Expiry after the grace period removes what the killed run uploaded but never committed, and
    # nothing a manifest names.
    expired = run_segpipe("tier", "--expire", remote, "--set", "segpipe.remote.orphan.grace.ms=0", env=s3_env)
    assert expired.returncode == ExitCode.OK, expired.stderr
    for tp in tier.partitions():
        newest = tier.read(tp)
        assert {f.name for f in tier.segment_objects(tp)} == newest.object_names
        tier.check_objects(newest)


def in_place_clean_equals_a_local_clean(s3_env: dict[str, str], sample_dir: Path, tmp_path: Path) -> None:
    remote = bucket(s3_env, "inplace")
    log = tmp_path / "log"
    shutil.copytree(sample_dir, log)
    assert run_segpipe("tier", str(log), remote, *RELEASE, env=s3_env).returncode == ExitCode.OK
    copy = tmp_path / "copy"
    assert (
        run_segpipe("restore", remote, str(copy), "--master", "local[2]", env=s3_env).returncode
        == ExitCode.OK
    )
    rules = [
        "--set",
        "cleanup.policy=compact",
        "--set",
        "retention.ms=-1",
        "--now",
        NOW,
        "--master",
        "local[2]",
    ]
    sealed = ["--set", "segpipe.last.segment.sealed=true"]
    reference = run_segpipe("clean", str(copy), str(tmp_path / "reference"), *rules, *sealed, env=s3_env)
    assert reference.returncode == ExitCode.OK, reference.stderr[-3000:]
    proc = run_segpipe("clean", remote, "--in-place", *rules, env=s3_env)
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    assert "committed the cleaned log of 4 partitions" in proc.stdout + proc.stderr
    after = tmp_path / "after"
    assert (
        run_segpipe("restore", remote, str(after), "--master", "local[2]", env=s3_env).returncode
        == ExitCode.OK
    )
    assert tree(after) == tree(tmp_path / "reference")


def test_tier_to_s3_reads_and_restores_as_the_original(
    s3_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    tier_reads_and_restores_as_the_original(s3_env, sample_dir, tmp_path)


def test_a_tier_run_killed_after_its_commit_is_finished_by_the_next(
    s3_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    # The other kill points (mid-upload, before the commit, mid-release, mid in-place clean) run
    # against SeaweedFS (test_tier_seaweedfs.py).
    killed_run_is_finished_by_the_next("after-commit", s3_env, sample_dir, tmp_path)


def test_a_local_masters_remote_work_starts_no_jvm(
    spark, s3_env: dict[str, str], sample_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """With a local master, tier, clean --in-place, erase --in-place and restore over S3 run in
    the driver's own processes: given a JVM that cannot start (a 1 KB heap) they finish anyway,
    and the in-place clean and erase leave the bytes they leave on Spark (this process's
    session, every stage its tasks), which cannot run with that JVM."""
    compact = ["cleanup.policy=compact", "retention.ms=-1"]
    keys = tmp_path / "keys.txt"
    keys.write_bytes(b"k0000000001\nk0000000042\n")
    restored = {}
    for name in ("processes", "spark"):
        log = tmp_path / name / "log"
        shutil.copytree(sample_dir, log)
        remote = bucket(s3_env, f"no-jvm-{name}")
        # Both tiers are written and read back the same way: in the driver's processes, without a JVM.
        tiered = run_segpipe("tier", str(log), remote, *RELEASE, *NO_JVM, env=s3_env)
        assert tiered.returncode == ExitCode.OK, tiered.stderr[-3000:]
        if name == "processes":
            for command in (
                ("clean", remote, "--in-place", *(f for c in compact for f in ("--set", c)), "--now", NOW),
                ("erase", remote, "--in-place", "--keys", str(keys)),
            ):
                proc = run_segpipe(*command, "--master", "local[2]", *NO_JVM, env=s3_env)
                assert proc.returncode == ExitCode.OK, f"{command[0]}: {proc.stderr[-3000:]}"
        else:  # the same on Spark: in this process's session (a command's own JVM would cost seconds)
            with monkeypatch.context() as patch:
                patch.setenv(DRIVER_WORK.env, "off")
                in_session_workers(spark, s3_env, patch)
                config = load_job_config(None, compact)
                before = spark_jobs_of(spark, "compact"), spark_jobs_of(spark, "erase")
                clean_in_place(spark, CleanRequest(src=remote, config=config, now_ms=NOW_MS), lambda _: None)
                erase_in_place(
                    spark, EraseRequest(src=Location(remote), dst=None, keys=str(keys)), lambda _: None
                )
                assert (
                    spark_jobs_of(spark, "compact") > before[0] and spark_jobs_of(spark, "erase") > before[1]
                )
        out = tmp_path / name / "restored"
        # The local log was not erased: a restore with it is refused (tests/s3/test_erase_s3.py).
        proc = run_segpipe("restore", remote, str(out), *NO_JVM, env=s3_env)
        assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
        restored[name] = tree(out)
    assert restored["processes"] == restored["spark"] and len(restored["spark"]) > 8
    on_spark = {**s3_env, DRIVER_WORK.env: "off"}
    refused = run_segpipe(
        "restore", bucket(s3_env, "no-jvm-spark"), str(tmp_path / "never"), *NO_JVM, env=on_spark
    )
    assert refused.returncode != ExitCode.OK and not (tmp_path / "never").exists()
