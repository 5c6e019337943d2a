"""gs:// paths and Kafka tiers in Google Cloud Storage, against a GCS server on 127.0.0.1
(gcp-storage-emulator): a clean from gs:// to gs:// is byte for byte a local run's; a tier to
gs:// restores as the original; a tier Aiven's plugin wrote through its GCS backend reads back
every record, with credentials as the plugin takes them; a lock object is made once; a missing
bucket is named."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from segment_io.exit_codes import ExitCode
from segment_io.storage import open_storage
from tests.e2e.test_kafka_tier_cli import dumped_records
from tests.helpers import read_log, run_segpipe
from tests.kip405 import ENCRYPTED, KIP405, produced
from tests.object_store_swap import SWAP_STEPS, killed_swap_is_finished_or_undone, swapped_in_the_store
from tests.s3.test_clean_s3 import killed_clean_is_cleaned_up_by_the_next
from tests.s3.test_tier_s3 import RELEASE, check_whole

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
    fs = gcs()
    fs.mkdir("archive")
    fs.put(str(sample_dir) + "/", "archive/src/", recursive=True)
    flags = ["--config", "conf/samples.yaml", "--now-ms", str(NOW), "--master", "local[2]"]
    proc = run_segpipe("clean", "gs://archive/src", "gs://archive/out", *flags, env=gcs_env)
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    fs.invalidate_cache()
    assert fs.exists("archive/out/_segpipe/manifest.json")
    assert not fs.exists("archive/out/_segpipe/INCOMPLETE")
    assert run_segpipe("inspect", "gs://archive/out", env=gcs_env).returncode == ExitCode.OK
    local = tmp_path / "local"
    assert run_segpipe("clean", str(sample_dir), str(local), *flags, env=gcs_env).returncode == ExitCode.OK
    fs.get("archive/out/", str(tmp_path / "from-gcs") + "/", recursive=True)
    for part in ("orders-0", "orders-1", "clicks-0", "legacy-users-0"):
        for log in sorted((local / part).glob("*")):
            assert (tmp_path / "from-gcs" / part / log.name).read_bytes() == log.read_bytes(), log.name
        assert read_log(tmp_path / "from-gcs", part) == read_log(local, part)
    again = run_segpipe("clean", "gs://archive/src", "gs://archive/out", *flags, env=gcs_env)
    assert again.returncode == ExitCode.REFUSED and "not empty" in again.stderr


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
    remote = "gs://tiers/tiered"
    log = tmp_path / "log"
    shutil.copytree(sample_dir, log)
    proc = run_segpipe("tier", str(log), remote, *RELEASE, env=gcs_env)
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    assert "each object read back" in proc.stdout + proc.stderr
    assert sum(1 for _ in log.rglob("*.log")) == 4  # the local log kept only its active segments
    split = run_segpipe("dump", str(log), "--remote", remote, env=gcs_env)
    whole = run_segpipe("dump", str(sample_dir))
    assert (
        split.returncode == ExitCode.OK and split.stdout == whole.stdout and whole.stdout.count("\n") > 8000
    )
    check_whole(gcs_env, remote, log, sample_dir, tmp_path)


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
    lines = (KIP405 / ENCRYPTED / "broker-tiered-storage.properties").read_text().splitlines()
    kept = [line for line in lines if not line.startswith("rsm.config.storage.")]
    text = "\n".join(kept).replace("${KEYS}", str(KIP405 / ENCRYPTED / "keys"))
    settings = tmp_path / f"{bucket}.properties"
    extra = GCS_SETTINGS.format(bucket=bucket, endpoint=gcs_env["STORAGE_EMULATOR_HOST"], token=token)
    settings.write_text(text + extra)
    return settings


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
