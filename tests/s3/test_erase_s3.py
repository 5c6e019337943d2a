"""`erase --in-place` of a remote tier on a real S3 endpoint (moto's server on 127.0.0.1): a new
manifest version without the listed keys' records; the old version still reads until expiry;
after `tier --expire` past the grace period, no object left in the bucket holds a listed key, in
any batch, decompressed."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest
from kafka.record.memory_records import MemoryRecords

from segment_io.exit_codes import ExitCode
from segment_io.generate import generate_log_dir
from segment_io.generate_spec import default_specs
from segment_io.remote.tier import RemoteTier
from segment_io.storage import open_storage
from tests.helpers import read_log, run_segpipe
from tests.s3.test_tier_s3 import RELEASE, bucket

pytestmark = pytest.mark.s3
KEYS = [b"k0000000001", b"k0000000003", b"k0000000042"]
PARTITIONS = ["orders-0", "orders-1", "clicks-0"]


@pytest.fixture
def tiered(s3_env: dict[str, str], tmp_path: Path) -> tuple[str, Path]:
    """A log (no magic 0/1 topic) tiered to S3, its local segments released but the active ones."""
    log = tmp_path / "log"
    storage, path = open_storage(str(log))
    generate_log_dir(storage, path, [s for s in default_specs() if s.legacy_magic is None])
    shutil.copytree(log, tmp_path / "original")
    remote = bucket(s3_env, f"erase-{tmp_path.name}")
    proc = run_segpipe("tier", str(log), remote, *RELEASE, env=s3_env)
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    (tmp_path / "keys.txt").write_bytes(b"".join(k + b"\n" for k in KEYS))
    return remote, tmp_path


def records(root: Path, part: str) -> list[tuple[object, ...]]:
    """A partition's records as a consumer sees them (batch positions shift where batches shrink)."""
    fields = ("offset", "timestamp", "key", "value", "headers", "is_control", "producer_id", "codec")
    return [tuple(r[f] for f in fields) for r in read_log(root, part)]


def restored(s3_env: dict[str, str], remote: str, dst: Path) -> Path:
    proc = run_segpipe("restore", remote, str(dst), "--master", "local[2]", env=s3_env)
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    return dst


def listed_keys_in_objects(s3_env: dict[str, str], remote: str) -> list[str]:
    """Every object of the tier read as raw bytes, and every .log object's batches decompressed
    (kafka-python): the objects where a listed key turns up."""
    import s3fs

    fs = s3fs.S3FileSystem(
        client_kwargs={"endpoint_url": s3_env["AWS_ENDPOINT_URL"]}, skip_instance_cache=True
    )
    found = []
    for name in fs.find(remote.removeprefix("s3://")):
        data = fs.cat_file(name)
        if any(k in data for k in KEYS):
            found.append(name)
        if name.endswith(".log"):
            records = MemoryRecords(data)
            while records.has_next():
                batch = records.next_batch()
                if any(r.key in KEYS or any(v in KEYS for _, v in r.headers) for r in batch):
                    found.append(f"{name} (decompressed)")
                    break
    return found


def test_in_place_erase_then_expiry_leaves_no_listed_key_in_the_bucket(
    s3_env: dict[str, str], tiered: tuple[str, Path]
) -> None:
    remote, work = tiered
    before = restored(s3_env, remote, work / "before")
    assert listed_keys_in_objects(s3_env, remote)  # the keys are there to begin with
    tier = RemoteTier.open(remote)
    versions = {tp: tier.read(tp).version for tp in tier.partitions()}
    proc = run_segpipe(
        "erase",
        remote,
        "--in-place",
        "--keys",
        str(work / "keys.txt"),
        "--validate",
        "--master",
        "local[2]",
        env=s3_env,
    )
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    assert "erasure proved" in proc.stdout and "committed the erased log of 3 partitions" in proc.stdout
    for tp in tier.partitions():
        newest = tier.read(tp)
        assert newest.version == versions[tp] + 1 and newest.note == "erase"
        tier.check_objects(newest)
        # The previous version still reads (readers that took it keep their objects until expiry).
        tier.check_objects(tier.read_version(tp, versions[tp]))
    after = restored(s3_env, remote, work / "after")
    for part in PARTITIONS:
        expected = [r for r in records(before, part) if r[5] or r[2] not in KEYS]
        assert records(after, part) == expected, part
    expired = run_segpipe("tier", "--expire", remote, "--set", "segpipe.remote.orphan.grace.ms=0", env=s3_env)
    assert expired.returncode == ExitCode.OK, expired.stderr
    assert listed_keys_in_objects(s3_env, remote) == []
    assert records(restored(s3_env, remote, work / "expired"), "orders-0") == records(after, "orders-0")


def test_a_kill_before_the_commit_leaves_the_old_version(
    s3_env: dict[str, str], tiered: tuple[str, Path]
) -> None:
    remote, work = tiered
    tier = RemoteTier.open(remote)
    before = {tp: tier.read(tp) for tp in tier.partitions()}
    killed = run_segpipe(
        "erase",
        remote,
        "--in-place",
        "--keys",
        str(work / "keys.txt"),
        "--master",
        "local[2]",
        env=s3_env,
        fault="in-place-uploaded",
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    for tp, manifest in before.items():  # nothing committed: readers see the old version, whole
        assert tier.read(tp) == manifest
        tier.check_objects(manifest)
    # The next run removes what the killed one staged, and erases.
    proc = run_segpipe(
        "erase", remote, "--in-place", "--keys", str(work / "keys.txt"), "--master", "local[2]", env=s3_env
    )
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    assert "removed the staging of an in-place run that did not commit" in proc.stdout
    for tp, manifest in before.items():
        assert tier.read(tp).version == manifest.version + 1


def test_restore_with_the_local_log_does_not_bring_erased_records_back(
    s3_env: dict[str, str], tiered: tuple[str, Path]
) -> None:
    """The erase rewrote the tier only: the local log's segments above it (the active ones) still
    hold listed keys. A restore with --local is refused, and with --keys it is refused naming
    them; once the local log is erased too, the restore goes ahead and holds no listed key."""

    remote, work = tiered
    keys = str(work / "keys.txt")
    proc = run_segpipe("erase", remote, "--in-place", "--keys", keys, "--master", "local[2]", env=s3_env)
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    assert "remain in the log directory this tier was uploaded from" in proc.stdout
    local = str(work / "log")
    assert any(r["key"] in KEYS for p in PARTITIONS for r in read_log(work / "log", p))
    refused = run_segpipe("restore", remote, str(work / "r1"), "--local", local, env=s3_env)
    assert refused.returncode == ExitCode.REFUSED and "was erased in place" in refused.stderr, refused.stderr
    checked = run_segpipe("restore", remote, str(work / "r2"), "--local", local, "--keys", keys, env=s3_env)
    assert checked.returncode == ExitCode.REFUSED and "holds records of listed keys" in checked.stderr
    assert not (work / "r1").exists() and not (work / "r2").exists()
    erased_local = str(work / "log-erased")
    proc = run_segpipe("erase", local, erased_local, "--keys", keys, env=s3_env)
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    ok = run_segpipe(
        "restore",
        remote,
        str(work / "r3"),
        "--local",
        erased_local,
        "--keys",
        keys,
        "--master",
        "local[2]",
        env=s3_env,
    )
    assert ok.returncode == ExitCode.OK, ok.stderr[-3000:]
    for part in PARTITIONS:
        rows = read_log(work / "r3", part)
        assert rows and not any(r["key"] in KEYS for r in rows), part


@pytest.mark.parametrize(("at", "committed"), [("in-place-uploaded", False), ("mid-commit", True)])
def test_a_stop_in_an_in_place_erase_commits_every_partition_or_none(
    s3_env: dict[str, str], tiered: tuple[str, Path], at: str, committed: bool
) -> None:
    """SIGTERM after the uploads, before the commit: no version changes; during the commit (one
    partition's new version written): every partition's is, then the run stops. Either way the
    command run again (or not needed) leaves the tier as an uninterrupted erase does."""
    remote, work = tiered
    tier = RemoteTier.open(remote)
    versions = {tp: tier.read(tp).version for tp in tier.partitions()}
    proc = run_segpipe(
        "erase",
        remote,
        "--in-place",
        "--keys",
        str(work / "keys.txt"),
        "--master",
        "local[2]",
        env=s3_env,
        fault=f"{at}:SIGTERM",
    )
    assert proc.returncode == ExitCode.TERMINATED, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    now = {tp: tier.read(tp).version for tp in tier.partitions()}
    if committed:
        assert (
            last == f"segpipe: terminated; published before the stop: the new manifest versions of {remote}"
        )
        assert now == {tp: v + 1 for tp, v in versions.items()}
    else:
        assert last == "segpipe: terminated; nothing was published" and now == versions
        again = run_segpipe(
            "erase",
            remote,
            "--in-place",
            "--keys",
            str(work / "keys.txt"),
            "--master",
            "local[2]",
            env=s3_env,
        )
        assert again.returncode == ExitCode.OK, again.stderr[-3000:]
    after = restored(s3_env, remote, work / "after")
    for part in PARTITIONS:
        assert not any(r[2] in KEYS for r in records(after, part)), part
