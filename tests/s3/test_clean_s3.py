"""`segpipe clean` and `inspect` against a real S3 endpoint (moto's server on 127.0.0.1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from segment_io.exit_codes import ExitCode
from tests.helpers import read_log, run_segpipe

pytestmark = pytest.mark.s3
ROOT = Path(__file__).resolve().parents[2]
NOW = 1_700_700_000_000


def test_clean_from_s3_to_s3_matches_a_local_run(
    s3_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    import s3fs

    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_env["AWS_ENDPOINT_URL"]})
    clean_in_the_store_matches_a_local_run(fs, "s3", s3_env, sample_dir, tmp_path)


def clean_in_the_store_matches_a_local_run(
    fs: Any, scheme: str, store_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    """A clean from `scheme`:// to `scheme`:// publishes a manifest and no marker, inspects, is
    byte for byte a local run of the same job, and a second run into it is refused (not empty)."""
    fs.mkdir("archive")
    fs.put(str(sample_dir) + "/", "archive/src/", recursive=True)
    flags = ["--config", "conf/samples.yaml", "--now-ms", str(NOW), "--master", "local[2]"]
    src, out = f"{scheme}://archive/src", f"{scheme}://archive/out"
    proc = run_segpipe("clean", src, out, *flags, env=store_env)
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    fs.invalidate_cache()
    assert fs.exists("archive/out/_segpipe/manifest.json")
    assert not fs.exists("archive/out/_segpipe/INCOMPLETE")
    assert run_segpipe("inspect", out, env=store_env).returncode == ExitCode.OK
    local = tmp_path / "local"
    assert run_segpipe("clean", str(sample_dir), str(local), *flags, env=store_env).returncode == ExitCode.OK
    fs.get("archive/out/", str(tmp_path / "from-store") + "/", recursive=True)
    for part in ("orders-0", "orders-1", "clicks-0", "legacy-users-0"):
        for log in sorted((local / part).glob("*")):
            assert (tmp_path / "from-store" / part / log.name).read_bytes() == log.read_bytes(), log.name
        assert read_log(tmp_path / "from-store", part) == read_log(local, part)
    again = run_segpipe("clean", src, out, *flags, env=store_env)
    assert again.returncode == ExitCode.REFUSED and "not empty" in again.stderr


def test_s3_writes_appear_only_on_commit_and_a_discard_aborts_the_upload(s3_env: dict[str, str]) -> None:
    import s3fs

    from segment_io.storage import open_storage

    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_env["AWS_ENDPOINT_URL"]})
    fs.mkdir("pending")
    storage, path = open_storage("s3://pending/p-0")
    chunk = bytes(range(256)) * 16384  # 4 MiB; 14 of them pass s3fs's 50 MiB part size
    kept = storage.open_write(f"{path}/kept.log")
    for _ in range(14):
        kept.write(chunk)
    assert not fs.exists("pending/p-0/kept.log")
    kept.commit()
    assert fs.size("pending/p-0/kept.log") == 14 * len(chunk)
    gone = storage.open_write(f"{path}/gone.log")
    for _ in range(14):
        gone.write(chunk)
    started = fs.call_s3("list_multipart_uploads", Bucket="pending").get("Uploads", [])
    assert [u["Key"] for u in started] == ["p-0/gone.log"]  # a multipart upload is under way
    gone.discard()
    fs.invalidate_cache()
    assert not fs.exists("pending/p-0/gone.log")
    uploads = fs.call_s3("list_multipart_uploads", Bucket="pending").get("Uploads", [])
    assert uploads == []  # aborted, not left behind to be billed


@pytest.mark.parametrize(
    "stage", ["after-scan", "after-keymap", "mid-rewrite", "before-publish", "after-publish"]
)
def test_a_run_killed_on_s3_is_cleaned_up_by_the_next_one(
    stage: str, s3_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    import s3fs

    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_env["AWS_ENDPOINT_URL"]})
    killed_clean_is_cleaned_up_by_the_next(stage, fs, "s3", s3_env, sample_dir, tmp_path)


def killed_clean_is_cleaned_up_by_the_next(
    stage: str, fs: Any, scheme: str, store_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    """A clean from `scheme`:// to `scheme`:// killed at `stage`: the output stays marked
    incomplete (readers take it for absent), the next run removes its staging and publishes, and
    the output is byte for byte a local run's."""
    import signal

    bucket = f"crash-{stage}"
    fs.mkdir(bucket)
    fs.put(str(sample_dir) + "/", f"{bucket}/src/", recursive=True)
    flags = ["--config", "conf/samples.yaml", "--now-ms", str(NOW), "--master", "local[2]"]
    env = {**os.environ, **store_env, "PYSPARK_PYTHON": sys.executable, "SEGPIPE_FAULT": stage}
    src, out = f"{scheme}://{bucket}/src", f"{scheme}://{bucket}/out"
    killed = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "clean", src, out, *flags],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env=env,
        start_new_session=True,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    fs.invalidate_cache()
    if stage == "after-scan":
        assert not fs.exists(f"{bucket}/out")  # nothing was written yet
    elif stage != "after-publish":
        assert fs.exists(f"{bucket}/out/_segpipe/INCOMPLETE")  # readers treat the output as absent
    if stage != "after-publish":  # published whole before the kill: nothing to redo
        proc = run_segpipe("clean", src, out, *flags, env=store_env)
        assert proc.returncode == ExitCode.OK, proc.stderr
        removed = f"segpipe: removed staging of a run that did not finish: {out}"
        assert (removed in proc.stdout) == (stage != "after-scan")
    local = tmp_path / "local"
    assert run_segpipe("clean", str(sample_dir), str(local), *flags, env=store_env).returncode == ExitCode.OK
    fs.invalidate_cache()
    fs.get(f"{bucket}/out/", str(tmp_path / "from-store") + "/", recursive=True)
    for part in ("orders-0", "orders-1", "clicks-0", "legacy-users-0"):
        assert sorted(p.name for p in (tmp_path / "from-store" / part).iterdir()) == sorted(
            p.name for p in (local / part).iterdir()
        )
        for log in (local / part).iterdir():
            assert (tmp_path / "from-store" / part / log.name).read_bytes() == log.read_bytes(), log.name
    assert not fs.exists(f"{bucket}/out/_segpipe/INCOMPLETE")


def test_a_copy_within_one_store_is_the_stores_own(
    s3_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between two handles on one S3 store a file moves by a server-side copy: reading it through
    this process would fail here, and the copy still arrives whole."""
    from segment_io.storage import open_storage, transfer
    from segment_io.storage.object_store import ObjectStorage

    src, bucket = open_storage("s3://copies")
    src.makedirs(bucket)
    data = bytes(range(256)) * 40_000  # 10 MB
    src.write_atomic("copies/a/00000000000000000000.log", data)
    dst, _ = open_storage("s3://copies/staging")
    assert src.same_store(dst) and not src.same_store(open_storage("memory://x")[0])

    def no_reads(self: ObjectStorage, path: str) -> None:
        raise AssertionError(f"{path} was read through this process")

    monkeypatch.setattr(ObjectStorage, "open_read", no_reads)
    transfer(src, "copies/a/00000000000000000000.log", dst, "copies/staging/a/00000000000000000000.log")
    assert dst.read("copies/staging/a/00000000000000000000.log") == data


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
def test_a_stop_during_publication_on_s3_keeps_the_published_output(
    s3_env: dict[str, str], sample_dir: Path, tmp_path: Path, signal_name: str
) -> None:
    """On an object store the staging is the destination itself: a stop held during the
    publication stops the run after it, and the output it published stays whole."""
    import s3fs

    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_env["AWS_ENDPOINT_URL"]})
    bucket = f"stop-{signal_name.lower()}"
    fs.mkdir(bucket)
    out = f"s3://{bucket}/out"
    flags = ["--config", "conf/samples.yaml", "--now-ms", str(NOW), "--master", "local[2]"]
    proc = run_segpipe("clean", str(sample_dir), out, *flags, env=s3_env, fault=f"mid-publish:{signal_name}")
    assert proc.returncode == {"SIGTERM": ExitCode.TERMINATED, "SIGINT": ExitCode.INTERRUPTED}[signal_name], (
        proc.stderr[-3000:]
    )
    assert proc.stderr.strip().splitlines()[-1].endswith(f"published before the stop: {out}")
    assert fs.exists(f"{bucket}/out/_segpipe/manifest.json") and not fs.exists(
        f"{bucket}/out/_segpipe/INCOMPLETE"
    )
    local = tmp_path / "local"
    assert run_segpipe("clean", str(sample_dir), str(local), *flags, env=s3_env).returncode == ExitCode.OK
    fs.get(f"{bucket}/out/", str(tmp_path / "from-s3") + "/", recursive=True)
    for part in ("orders-0", "orders-1", "clicks-0", "legacy-users-0"):
        assert read_log(tmp_path / "from-s3", part) == read_log(local, part), part
