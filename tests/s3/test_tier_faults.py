"""`tier` through a proxy that makes S3 misbehave: throttling, 500s, dropped connections and
stalls are ridden out; a permanent refusal stops the run naming the object and the cause, with
nothing committed, nothing released locally, and no credential in what it prints. The two checks
are written for any store: GCS and Azure run them with their own faults."""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from segment_io.exit_codes import ExitCode
from segment_io.remote.tier import RemoteTier
from tests.fault_proxy import Fault, FaultProxy
from tests.helpers import run_segpipe
from tests.s3.test_tier_s3 import RELEASE, bucket, check_whole, tree

pytestmark = pytest.mark.s3
SECRET = "s3cr3t-never-printed"
# The object a refusal is aimed at: one segment of the samples' partition, in every store's paths.
REFUSED_SEGMENT = "clicks-0/segments/00000000000000000380"


def faults_are_ridden_out(
    proxy: FaultProxy,
    faults: Iterable[Fault],
    env: dict[str, str],
    store_env: dict[str, str],
    remote: str,
    sample_dir: Path,
    tmp_path: Path,
) -> None:
    """A tier through `proxy` (its variables `env`) meeting every one of `faults` exits 0, and the
    tier (read straight from the store, `store_env`) restores as the original."""
    log = tmp_path / "log"
    shutil.copytree(sample_dir, log)
    for fault in faults:
        proxy.add(fault)
    proc = run_segpipe("tier", str(log), remote, *RELEASE, env=env)
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    assert all(f.hits == f.times for f in proxy.faults), [
        (f.kind, f.method, f.path_contains, f.hits) for f in proxy.faults
    ]
    proxy.clear()
    check_whole(store_env, remote, log, sample_dir, tmp_path)


def refusal_commits_nothing(
    proxy: FaultProxy,
    refusal: Fault,
    env: dict[str, str],
    secret: str | None,
    remote: str,
    sample_dir: Path,
    tmp_path: Path,
) -> str:
    """A tier through `proxy` whose every upload of REFUSED_SEGMENT meets `refusal` exits with the
    I/O code and one error line naming that object, `secret` (if any) nowhere in what it prints; no version
    is committed, nothing is released locally. The error line, for the store's own checks."""
    log = tmp_path / "log"
    shutil.copytree(sample_dir, log)
    before = tree(log)
    proxy.add(refusal)
    proc = run_segpipe("tier", str(log), remote, *RELEASE, env=env)
    assert proc.returncode == ExitCode.IO, proc.stderr[-3000:]
    # One error line. (The JVM may still log the cancellation of the other task under way after
    # it, while Spark stops: that is Spark's own shutdown log, not segpipe's message.)
    [error] = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert error.startswith(f"error: upload failed: {remote}/{REFUSED_SEGMENT}-"), error
    assert secret is None or secret not in proc.stdout + proc.stderr
    tier = RemoteTier.open(remote)
    assert all(tier.versions(tp) == [] for tp in tier.partitions())  # nothing committed
    assert tree(log) == before  # nothing released
    return error


@pytest.fixture
def proxied(s3_env: dict[str, str]) -> Iterator[tuple[FaultProxy, dict[str, str]]]:
    with FaultProxy(s3_env["AWS_ENDPOINT_URL"]) as proxy:
        yield proxy, {**s3_env, "AWS_ENDPOINT_URL": proxy.url, "AWS_SECRET_ACCESS_KEY": SECRET}


def test_throttling_errors_drops_and_stalls_are_ridden_out(
    proxied: tuple[FaultProxy, dict[str, str]], s3_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    proxy, env = proxied
    faults = (
        Fault("status", "PUT", ".log", times=3, status=503, code="SlowDown"),
        Fault("status", "PUT", ".index", times=2, status=500, code="InternalError"),
        Fault("status", "GET", ".timeindex", times=2, status=500, code="InternalError"),
        Fault("drop", "PUT", ".timeindex", times=2),
        Fault("drop", "GET", ".log", times=1),
        Fault("stall", "PUT", "/manifest/", times=1, seconds=1.5),
    )
    faults_are_ridden_out(proxy, faults, env, s3_env, bucket(s3_env, "flaky"), sample_dir, tmp_path)


def test_a_permanent_refusal_stops_the_run_and_commits_nothing(
    proxied: tuple[FaultProxy, dict[str, str]], s3_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    proxy, env = proxied
    refusal = Fault("status", "PUT", REFUSED_SEGMENT, times=-1, status=403, code="AccessDenied")
    remote = bucket(s3_env, "denied")
    error = refusal_commits_nothing(proxy, refusal, env, SECRET, remote, sample_dir, tmp_path)
    assert "PermissionError" in error or "AccessDenied" in error or "Forbidden" in error
