"""az:// paths and Kafka tiers in Azure Blob Storage, against Azurite on 127.0.0.1: a clean from
az:// to az:// is byte for byte a local run's, and one killed at each step that leaves objects is
cleaned up by the next; a tier to az:// restores as the original; a tier Aiven's plugin wrote
through its Azure backend reads back every record, with credentials as the plugin takes them; a
lock object is made once; a missing container is named; throttling, drops and a request that
times out are ridden out, and a refusal is typed and named as on S3 (tests/s3/test_tier_faults.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from segment_io.exit_codes import ExitCode
from segment_io.storage import open_storage
from tests.azure.azurite import ACCOUNT, ACCOUNT_KEY
from tests.e2e.test_kafka_tier_cli import dumped_records
from tests.fault_proxy import AZURE, Fault, FaultProxy
from tests.helpers import run_segpipe
from tests.kip405 import ENCRYPTED, KIP405, produced, with_backend
from tests.object_store_swap import SWAP_STEPS, killed_swap_is_finished_or_undone, swapped_in_the_store
from tests.s3.test_clean_s3 import (
    clean_in_the_store_matches_a_local_run,
    killed_clean_is_cleaned_up_by_the_next,
)
from tests.s3.test_tier_faults import REFUSED_SEGMENT, faults_are_ridden_out, refusal_commits_nothing
from tests.s3.test_tier_s3 import tiered_reads_and_restores

pytestmark = pytest.mark.azure
NOW = 1_700_700_000_000
AZURE_SETTINGS = """
rsm.config.storage.backend.class=io.aiven.kafka.tieredstorage.storage.azure.AzureBlobStorage
rsm.config.storage.azure.container.name={container}
rsm.config.storage.azure.account.name={account}
rsm.config.storage.azure.account.key={key}
rsm.config.storage.azure.endpoint.url={endpoint}
"""


def azure() -> Any:
    import adlfs

    return adlfs.AzureBlobFileSystem()  # the connection string from the environment


def test_clean_from_azure_to_azure_matches_a_local_run(
    azure_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    clean_in_the_store_matches_a_local_run(azure(), "az", azure_env, sample_dir, tmp_path)


@pytest.mark.parametrize("stage", ["after-keymap", "before-publish"])
def test_a_run_killed_on_azure_is_cleaned_up_by_the_next_one(
    stage: str, azure_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    """As on S3 (tests/s3/test_clean_s3.py, every stage there): a block blob appears only once
    its block list is committed, so a killed run's output is its marker and its staging, which
    the next run removes before it publishes."""
    killed_clean_is_cleaned_up_by_the_next(stage, azure(), "az", azure_env, sample_dir, tmp_path)


def test_tier_to_azure_reads_and_restores_as_the_original(
    azure_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    azure().mkdir("tiers")
    tiered_reads_and_restores(azure_env, "az://tiers/tiered", sample_dir, tmp_path)


def test_an_aiven_tier_in_azure_reads_back_every_record(
    azure_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plugin's own settings (account, shared key, the emulator's endpoint), with no variable
    of the test's own: the objects a broker wrote, copied into a container, read back exactly."""
    fs = azure()
    fs.mkdir("tiered-container")
    fs.put(str(KIP405 / ENCRYPTED / "bucket") + "/", "tiered-container/", recursive=True)
    endpoint = azure_env["AZURE_STORAGE_CONNECTION_STRING"].split("BlobEndpoint=")[1].rstrip(";")
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING")
    got = dumped_records(
        str(KIP405 / ENCRYPTED / "logdir"), "--kafka-tier", str(aiven_settings(tmp_path, endpoint))
    )
    assert got == produced(ENCRYPTED)


def aiven_settings(tmp_path: Path, endpoint: str, container: str = "tiered-container") -> Path:
    """The broker's settings of the fixture's tier, its backend Azure (the plugin's own names)."""
    backend = AZURE_SETTINGS.format(container=container, account=ACCOUNT, key=ACCOUNT_KEY, endpoint=endpoint)
    return with_backend(ENCRYPTED, backend, tmp_path / f"{container}.properties")


def test_a_segment_in_azure_is_swapped_for_a_compacted_successor(
    azure_env: dict[str, str], tmp_path: Path
) -> None:
    """What erase and compaction in place do to a tier there: the objects a broker wrote, copied
    into a container, one segment swapped (tests/object_store_swap.py), the metadata replayed."""
    fs = azure()
    fs.mkdir("swapped-container")
    fs.put(str(KIP405 / ENCRYPTED / "bucket") + "/", "swapped-container/", recursive=True)
    endpoint = azure_env["AZURE_STORAGE_CONNECTION_STRING"].split("BlobEndpoint=")[1].rstrip(";")
    swapped_in_the_store(
        aiven_settings(tmp_path, endpoint, "swapped-container"), KIP405 / ENCRYPTED / "logdir"
    )


@pytest.mark.parametrize("step", SWAP_STEPS)
def test_a_swap_in_azure_killed_at_each_step_is_finished_or_undone(
    step: str, azure_env: dict[str, str], tmp_path: Path
) -> None:
    container = f"killed-{step.removeprefix('kafka-tier-')}"
    azure().mkdir(container)
    azure().put(str(KIP405 / ENCRYPTED / "bucket") + "/", f"{container}/", recursive=True)
    endpoint = azure_env["AZURE_STORAGE_CONNECTION_STRING"].split("BlobEndpoint=")[1].rstrip(";")
    settings = aiven_settings(tmp_path, endpoint, container)
    killed_swap_is_finished_or_undone(settings, KIP405 / ENCRYPTED / "logdir", step)


def test_a_lock_object_is_made_once(azure_env: dict[str, str]) -> None:
    """A create is an upload with If-None-Match: *, which the store refuses once the blob exists."""
    azure().mkdir("locks")
    storage, path = open_storage("az://locks/run")
    storage.create_exclusive(f"{path}/lock", b"one")
    with pytest.raises(FileExistsError):
        storage.create_exclusive(f"{path}/lock", b"two")
    assert storage.read(f"{path}/lock") == b"one"


def test_a_missing_container_is_named(azure_env: dict[str, str]) -> None:
    proc = run_segpipe("inspect", "az://no-such-container/logs", env=azure_env)
    assert proc.returncode == ExitCode.REFUSED, proc.stderr
    assert (
        "log directory not found: az://no-such-container/logs" in proc.stderr
        and "Traceback" not in proc.stderr
    )


def test_a_refused_credential_is_the_environments_error(azure_env: dict[str, str]) -> None:
    """A key the store does not take (403): exit 2 with the store's own words, never a traceback."""
    import base64

    other = base64.b64encode(b"not the account's key, 64 bytes long, as Azure's keys are......").decode()
    wrong = azure_env["AZURE_STORAGE_CONNECTION_STRING"].replace(ACCOUNT_KEY, other)
    proc = run_segpipe("inspect", "az://archive/src", env={"AZURE_STORAGE_CONNECTION_STRING": wrong})
    assert proc.returncode == ExitCode.REFUSED, proc.stderr
    assert "failed to authenticate" in proc.stderr and "Traceback" not in proc.stderr


TIMEOUT_S = 2  # a request with no answer in this time is given up (fsspec's setting for adlfs)


@pytest.fixture
def proxied(azure_env: dict[str, str]) -> Iterator[tuple[FaultProxy, dict[str, str]]]:
    connection = azure_env["AZURE_STORAGE_CONNECTION_STRING"]
    endpoint = connection.split("BlobEndpoint=")[1].split(";")[0]  # http://127.0.0.1:PORT/ACCOUNT
    upstream = endpoint.rsplit("/", 1)[0]
    with FaultProxy(upstream, errors=AZURE) as proxy:
        yield (
            proxy,
            {
                "AZURE_STORAGE_CONNECTION_STRING": connection.replace(upstream, proxy.url),
                "FSSPEC_AZ": json.dumps({"read_timeout": TIMEOUT_S}),
            },
        )


def test_throttling_a_drop_and_a_timed_out_request_are_ridden_out(
    proxied: tuple[FaultProxy, dict[str, str]], azure_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    """Azure's client waits 15 s or more before its first retry (its default): one fault of each
    kind here."""
    proxy, env = proxied
    azure().mkdir("flaky")
    faults = (
        Fault("status", "PUT", ".log", times=1, status=503, code="ServerBusy"),
        Fault("drop", "PUT", ".timeindex", times=1),
        Fault("stall", "GET", ".index", times=1, seconds=3 * TIMEOUT_S),
    )
    faults_are_ridden_out(proxy, faults, env, azure_env, "az://flaky/tiered", sample_dir, tmp_path)


def test_a_refusal_stops_the_run_named_and_commits_nothing(
    proxied: tuple[FaultProxy, dict[str, str]], sample_dir: Path, tmp_path: Path
) -> None:
    """Azure's client raises a 403 as its own HttpResponseError: segpipe reads it as denied (not
    retried), in the store's words, and never prints the account key."""
    proxy, env = proxied
    azure().mkdir("denied")
    refusal = Fault(
        "status", "PUT", REFUSED_SEGMENT, times=-1, status=403, code="AuthorizationPermissionMismatch"
    )
    error = refusal_commits_nothing(
        proxy, refusal, env, ACCOUNT_KEY, "az://denied/tiered", sample_dir, tmp_path
    )
    assert "PermissionError: az://denied/tiered/clicks-0/segments/" in error
    assert "AuthorizationPermissionMismatch" in error and "[HTTP 403]" in error
    assert "attempts" not in error  # refused at once, not retried
