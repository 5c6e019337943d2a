"""gs:// paths and Kafka tiers in Google Cloud Storage, against a GCS server on 127.0.0.1
(gcp-storage-emulator): a clean from gs:// to gs:// is byte for byte a local run's; a tier to
gs:// restores as the original; a tier Aiven's plugin wrote through its GCS backend reads back
every record, with credentials as the plugin takes them; a lock object is made once; a missing
bucket is named; throttling, server errors, drops and a request that times out are ridden out,
and a refusal is typed and named as on S3 (tests/s3/test_tier_faults.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from segment_io.exit_codes import ExitCode
from segment_io.storage import open_storage
from tests.e2e.test_kafka_tier_cli import dumped_records
from tests.fault_proxy import GCS, Fault, FaultProxy
from tests.helpers import run_segpipe
from tests.kip405 import ENCRYPTED, KIP405, produced, with_backend
from tests.object_store_swap import SWAP_STEPS, killed_swap_is_finished_or_undone, swapped_in_the_store
from tests.s3.test_clean_s3 import (
    clean_in_the_store_matches_a_local_run,
    killed_clean_is_cleaned_up_by_the_next,
)
from tests.s3.test_tier_faults import REFUSED_SEGMENT, faults_are_ridden_out, refusal_commits_nothing
from tests.s3.test_tier_s3 import tiered_reads_and_restores

pytestmark = pytest.mark.gcs
NOW = 1_700_700_000_000
GCS_SETTINGS = """
rsm.config.storage.backend.class=io.aiven.kafka.tieredstorage.storage.gcs.GcsStorage
rsm.config.storage.gcs.bucket.name={bucket}
rsm.config.storage.gcs.endpoint.url={endpoint}
rsm.config.storage.gcs.credentials.path={token}
"""


def gcs() -> Any:
    import gcsfs

    return gcsfs.GCSFileSystem(token="anon")


def test_clean_from_gcs_to_gcs_matches_a_local_run(
    gcs_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    clean_in_the_store_matches_a_local_run(gcs(), "gs", gcs_env, sample_dir, tmp_path)


@pytest.mark.parametrize("stage", ["after-keymap", "mid-rewrite", "before-publish"])
def test_a_run_killed_on_gcs_is_cleaned_up_by_the_next_one(
    stage: str, gcs_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    """As on S3 (tests/s3/test_clean_s3.py, every stage there; here those that leave objects in
    the store): an object appears only once its upload is finalized, so a killed run's output is
    its marker and its staging, which the next run removes before it publishes."""
    killed_clean_is_cleaned_up_by_the_next(stage, gcs(), "gs", gcs_env, sample_dir, tmp_path)


def test_tier_to_gcs_reads_and_restores_as_the_original(
    gcs_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    gcs().mkdir("tiers")
    tiered_reads_and_restores(gcs_env, "gs://tiers/tiered", sample_dir, tmp_path)


def test_an_aiven_tier_in_gcs_reads_back_every_record(gcs_env: dict[str, str], tmp_path: Path) -> None:
    fs = gcs()
    fs.mkdir("tiered-bucket")
    fs.put(str(KIP405 / ENCRYPTED / "bucket") + "/", "tiered-bucket/", recursive=True)
    got = dumped_records(
        str(KIP405 / ENCRYPTED / "logdir"), "--kafka-tier", str(aiven_settings(gcs_env, tmp_path))
    )
    assert got == produced(ENCRYPTED)


def aiven_settings(gcs_env: dict[str, str], tmp_path: Path, bucket: str = "tiered-bucket") -> Path:
    """The broker's settings of the fixture's tier, its backend GCS, with an access token in the
    plugin's other file form ({"access_token": ...})."""
    token = tmp_path / "token.json"
    token.write_text(json.dumps({"access_token": "ya29.test"}))
    backend = GCS_SETTINGS.format(bucket=bucket, endpoint=gcs_env["STORAGE_EMULATOR_HOST"], token=token)
    return with_backend(ENCRYPTED, backend, tmp_path / f"{bucket}.properties")


def test_a_segment_in_gcs_is_swapped_for_a_compacted_successor(
    gcs_env: dict[str, str], tmp_path: Path
) -> None:
    """What erase and compaction in place do to a tier there: the objects a broker wrote, copied
    into a bucket, one segment swapped (tests/object_store_swap.py), the metadata replayed."""
    fs = gcs()
    fs.mkdir("swapped-bucket")
    fs.put(str(KIP405 / ENCRYPTED / "bucket") + "/", "swapped-bucket/", recursive=True)
    swapped_in_the_store(aiven_settings(gcs_env, tmp_path, "swapped-bucket"), KIP405 / ENCRYPTED / "logdir")


@pytest.mark.parametrize("step", SWAP_STEPS)
def test_a_swap_in_gcs_killed_at_each_step_is_finished_or_undone(
    step: str, gcs_env: dict[str, str], tmp_path: Path
) -> None:
    bucket = f"killed-{step.removeprefix('kafka-tier-')}"
    gcs().mkdir(bucket)
    gcs().put(str(KIP405 / ENCRYPTED / "bucket") + "/", f"{bucket}/", recursive=True)
    killed_swap_is_finished_or_undone(
        aiven_settings(gcs_env, tmp_path, bucket), KIP405 / ENCRYPTED / "logdir", step
    )


def test_a_lock_object_is_made_once(gcs_env: dict[str, str]) -> None:
    """A create is conditional (ifGenerationMatch=0, which GCS refuses with 412 once the object
    exists); this emulator ignores the condition, so the check before it refuses here."""
    gcs().mkdir("locks")
    storage, path = open_storage("gs://locks/run")
    storage.create_exclusive(f"{path}/lock", b"one")
    with pytest.raises(FileExistsError):
        storage.create_exclusive(f"{path}/lock", b"two")
    assert storage.read(f"{path}/lock") == b"one"


def test_a_missing_bucket_is_named(gcs_env: dict[str, str], tmp_path: Path) -> None:
    proc = run_segpipe("inspect", "gs://no-such-bucket/logs", env=gcs_env)
    assert proc.returncode == ExitCode.REFUSED, proc.stderr
    assert (
        "log directory not found: gs://no-such-bucket/logs" in proc.stderr and "Traceback" not in proc.stderr
    )


TIMEOUT_S = 2  # a request with no answer in this time is given up (fsspec's setting for gcsfs)


@pytest.fixture
def proxied(gcs_env: dict[str, str]) -> Iterator[tuple[FaultProxy, dict[str, str]]]:
    with FaultProxy(gcs_env["STORAGE_EMULATOR_HOST"], errors=GCS) as proxy:
        timeout = json.dumps({"requests_timeout": TIMEOUT_S})
        yield proxy, {**gcs_env, "STORAGE_EMULATOR_HOST": proxy.url, "FSSPEC_GS": timeout}


def test_throttling_errors_drops_and_a_timed_out_request_are_ridden_out(
    proxied: tuple[FaultProxy, dict[str, str]], gcs_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    """An upload names its object in the body's metadata part (POST), a read in its path (GET);
    a request unanswered past the client's time-out is given up and made again."""
    proxy, env = proxied
    gcs().mkdir("flaky")
    faults = (
        Fault("status", "POST", ".log", times=2, status=429, code="rateLimitExceeded"),
        Fault("status", "POST", ".index", times=1, status=503, code="backendError"),
        Fault("status", "GET", ".timeindex", times=1, status=500, code="backendError"),
        Fault("drop", "POST", ".timeindex", times=1),
        Fault("stall", "GET", ".index", times=1, seconds=3 * TIMEOUT_S),
    )
    faults_are_ridden_out(proxy, faults, env, gcs_env, "gs://flaky/tiered", sample_dir, tmp_path)


def test_a_refusal_stops_the_run_named_and_commits_nothing(
    proxied: tuple[FaultProxy, dict[str, str]], sample_dir: Path, tmp_path: Path
) -> None:
    """gcsfs raises a 403 as a bare OSError: segpipe reads it as denied (not retried)."""
    proxy, env = proxied
    gcs().mkdir("denied")
    refusal = Fault("status", "POST", REFUSED_SEGMENT, times=-1, status=403, code="forbidden")
    error = refusal_commits_nothing(proxy, refusal, env, None, "gs://denied/tiered", sample_dir, tmp_path)
    assert "PermissionError: gs://denied/tiered/clicks-0/segments/" in error and "[HTTP 403]" in error
    assert "attempts" not in error  # refused at once, not retried
