"""Kafka's tiered storage read back: the remote tiers a broker wrote through Aiven's plugin
(tests/data/kip405), record for record, and every way such a tier can be bad refused with the
segment and the object named."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from segment_io.errors import KafkaTierCorrupt, KafkaTierSettings
from segment_io.kafka_tier.aiven import AivenManifest, custom_fields, object_key
from segment_io.kafka_tier.metadata import SegmentState
from segment_io.kafka_tier.metadata_cache import MetadataReplay
from segment_io.kafka_tier.metadata_log import read_metadata_log
from segment_io.kafka_tier.settings import LOCAL_TIERED_STORAGE as LOCAL
from segment_io.kafka_tier.url import kafka_tier_url
from segment_io.storage import LocalStorage, open_storage
from tests.kip405 import ENCRYPTED, PLAIN, records, tier

pytestmark = pytest.mark.unit


def read_tier(settings: Path, logdir: Path) -> dict[tuple[int, int], tuple[bytes, bytes]]:
    storage, root = open_storage(kafka_tier_url(str(settings), str(logdir)))
    return records(storage, root)


@pytest.mark.parametrize("name", [PLAIN, ENCRYPTED])
def test_every_produced_record_reads_back_exactly(name: str, tmp_path: Path) -> None:
    t = tier(name, tmp_path)
    assert read_tier(t.settings, t.logdir) == t.produced


@pytest.mark.parametrize("name", [PLAIN, ENCRYPTED])
def test_the_view_lists_each_remote_segment_under_its_kafka_names(name: str, tmp_path: Path) -> None:
    t = tier(name, tmp_path)
    storage, root = open_storage(kafka_tier_url(str(t.settings), str(t.logdir)))
    names = [f.name for f in storage.list(f"{root}/kip405-0")]
    logs = [n for n in names if n.endswith(".log")]
    bases = [int(n.split(".")[0]) for n in logs]
    assert bases == sorted(bases) and bases[0] == 0
    assert all(f"{b:020d}.index" in names and f"{b:020d}.timeindex" in names for b in bases[:-1])
    # The remote log ends where the broker's local active segment begins (its empty segment).
    assert bases[-1] == min(int(p.name.split(".")[0]) for p in (t.logdir / "kip405-0").glob("*.log"))
    assert "leader-epoch-checkpoint" in names


def test_the_remote_log_metadata_decodes_as_the_broker_wrote_it(tmp_path: Path) -> None:
    t = tier(ENCRYPTED, tmp_path)
    replay = MetadataReplay.of(read_metadata_log(LocalStorage(), str(t.logdir)))
    served = replay.served()
    assert sorted(tp.partition for tp in served) == [0, 1]
    for tp, state in served.items():
        segs = state.served()
        objects = {p.name for p in (t.bucket / f"kip405-{tp.topic_id}" / str(tp.partition)).iterdir()}
        assert len(objects) == 3 * len(segs)
        ends = [s.start_offset for s in segs[1:]]
        assert [s.end_offset + 1 for s in segs[:-1]] == ends  # contiguous
        for s in segs:
            assert s.state is SegmentState.COPY_SEGMENT_FINISHED and s.leader_epochs == ((0, s.start_offset),)
            fields = custom_fields(s.custom_metadata)
            assert fields[1] == "" and object_key(s, "ignored/", "log").rsplit("/", 1)[1] in objects
            assert fields[0] == sum(
                (t.bucket / object_key(s, "", x)).stat().st_size for x in ("log", "indexes", "rsm-manifest")
            )


def test_every_chunk_index_adds_up_to_its_object(tmp_path: Path) -> None:
    """Fixed and variable chunk indexes: the transformed chunks fill the `.log` object exactly."""
    for name in (PLAIN, ENCRYPTED):
        for manifest in (tier(name, tmp_path).bucket).rglob("*.rsm-manifest"):
            parsed = AivenManifest.parse(manifest.read_bytes(), str(manifest))
            log = manifest.with_suffix(".log")
            assert sum(c.transformed_size for c in parsed.chunks) == log.stat().st_size
            assert sum(c.original_size for c in parsed.chunks) == parsed.original_size


def other_key_pair(directory: Path) -> Path:
    directory.mkdir()
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    (directory / "private.pem").write_bytes(pem)
    return directory


def test_a_wrong_key_pair_is_refused_naming_the_segment(tmp_path: Path) -> None:
    t = tier(ENCRYPTED, tmp_path, keys=other_key_pair(tmp_path / "other"))
    with pytest.raises(KafkaTierSettings, match=r"segment [\w-]{22} .*key pair 'k1' .*wrong key pair"):
        read_tier(t.settings, t.logdir)


def test_a_key_pair_the_settings_do_not_configure_is_refused(tmp_path: Path) -> None:
    t = tier(ENCRYPTED, tmp_path)
    text = "\n".join(line for line in t.settings.read_text().splitlines() if "key.pairs" not in line)
    t.settings.write_text(text)
    with pytest.raises(
        KafkaTierSettings, match=r"wrapped by key pair 'k1', which the settings do not configure"
    ):
        read_tier(t.settings, t.logdir)


@pytest.mark.parametrize("name", [PLAIN, ENCRYPTED])
def test_a_truncated_object_is_refused_naming_the_object_and_byte(name: str, tmp_path: Path) -> None:
    t = tier(name, tmp_path, copy_bucket=True)
    log = sorted(t.bucket.rglob("*.log"))[3]
    size = log.stat().st_size
    log.write_bytes(log.read_bytes()[: size - 100])
    with pytest.raises(KafkaTierCorrupt) as info:
        read_tier(t.settings, t.logdir)
    assert info.value.path == str(log) and info.value.position == size - 100
    assert log.stem.split("-", 1)[1] in info.value.detail  # the segment id


def test_a_damaged_encrypted_chunk_fails_its_authentication(tmp_path: Path) -> None:
    t = tier(ENCRYPTED, tmp_path, copy_bucket=True)
    log = sorted(t.bucket.rglob("*.log"))[2]
    data = bytearray(log.read_bytes())
    data[len(data) // 2] ^= 0x01
    log.write_bytes(bytes(data))
    with pytest.raises(KafkaTierCorrupt, match="AES-GCM authentication") as info:
        read_tier(t.settings, t.logdir)
    assert info.value.path == str(log) and info.value.position is not None


def edit_manifest(t_bucket: Path, index: int, change: object) -> Path:
    manifest = sorted(t_bucket.rglob("*.rsm-manifest"))[index]
    doc = json.loads(manifest.read_bytes())
    change(doc)  # type: ignore[operator]
    manifest.write_text(json.dumps(doc))
    return manifest


def test_a_manifest_that_disagrees_with_the_metadata_is_refused(tmp_path: Path) -> None:
    t = tier(PLAIN, tmp_path, copy_bucket=True)
    manifest = edit_manifest(t.bucket, 1, lambda d: d["remoteLogSegmentMetadata"].update(endOffset=5))
    with pytest.raises(
        KafkaTierCorrupt, match=r"the manifest disagrees with the remote log metadata: its offsets"
    ):
        read_tier(t.settings, t.logdir)
    shutil.rmtree(t.bucket)
    t = tier(PLAIN, tmp_path, copy_bucket=True)
    manifest = edit_manifest(t.bucket, 1, lambda d: d.update(version="2"))
    with pytest.raises(KafkaTierCorrupt, match=r"a segment manifest of version '2'") as info:
        read_tier(t.settings, t.logdir)
    assert info.value.path == str(manifest)


def test_a_missing_object_is_refused(tmp_path: Path) -> None:
    t = tier(PLAIN, tmp_path, copy_bucket=True)
    manifest = sorted(t.bucket.rglob("*.rsm-manifest"))[4]
    manifest.unlink()
    with pytest.raises(KafkaTierCorrupt, match="its manifest is missing") as info:
        read_tier(t.settings, t.logdir)
    assert info.value.path == str(manifest)


def test_a_metadata_record_of_an_unknown_version_is_refused(tmp_path: Path) -> None:
    from segment_io.kafka_tier.metadata import decode_metadata_record

    with pytest.raises(KafkaTierCorrupt, match=r"type 0 in schema version 3 \(only 0 is known\)"):
        decode_metadata_record(bytes([1, 0, 3]) + b"\x00" * 40, "where (offset 7)")
    with pytest.raises(KafkaTierCorrupt, match=r"unknown type \(apiKey 9\)"):
        decode_metadata_record(bytes([1, 9, 0]), "where (offset 7)")
    with pytest.raises(KafkaTierCorrupt, match="frame version 0"):
        decode_metadata_record(bytes([0, 0, 0]), "where (offset 7)")


def test_settings_of_a_plugin_segpipe_does_not_read_are_refused(tmp_path: Path) -> None:
    settings = tmp_path / "s.properties"
    settings.write_text("remote.log.storage.manager.class.name=com.example.Other\n")
    with pytest.raises(KafkaTierSettings, match=r"com\.example\.Other"):
        open_storage(kafka_tier_url(str(settings), str(tmp_path)))
    for bad in ("three", "0", ""):  # a count of metadata partitions must be one or more
        settings.write_text(
            f"remote.log.storage.manager.class.name={LOCAL}\nrsm.config.dir=/x\n"
            f"rlmm.config.remote.log.metadata.topic.num.partitions={bad}\n"
        )
        with pytest.raises(KafkaTierSettings, match=rf"num\.partitions='{bad}' is not a positive number"):
            open_storage(kafka_tier_url(str(settings), str(tmp_path)))
    with pytest.raises(KafkaTierSettings, match="no tiered-storage settings file"):
        open_storage(kafka_tier_url(str(tmp_path / "absent.properties"), str(tmp_path)))


def test_the_view_is_read_only(tmp_path: Path) -> None:
    t = tier(PLAIN, tmp_path)
    storage, root = open_storage(kafka_tier_url(str(t.settings), str(t.logdir)))
    with pytest.raises(PermissionError):
        storage.remove(f"{root}/kip405-0")


def test_a_range_read_transforms_only_the_chunks_it_needs(tmp_path: Path) -> None:
    """Bytes in the middle of a segment come from the chunks that hold them: the others may be
    damaged and the read still succeeds (and equals the whole read's bytes)."""
    t = tier(ENCRYPTED, tmp_path)
    storage, root = open_storage(kafka_tier_url(str(t.settings), str(t.logdir)))
    log = next(f for f in storage.list(f"{root}/kip405-0") if f.name == "00000000000000000477.log")
    whole = storage.read(log.path)
    damaged = tier(ENCRYPTED, tmp_path, copy_bucket=True)
    obj = next(damaged.bucket.rglob(Path(log.path).name))
    data = bytearray(obj.read_bytes())
    data[-5] ^= 0xFF  # inside the last chunk
    obj.write_bytes(bytes(data))
    view, _ = open_storage(kafka_tier_url(str(damaged.settings), str(damaged.logdir)))
    assert view.read(str(obj), 20_000, 30_000) == whole[20_000:30_000]
    with pytest.raises(KafkaTierCorrupt):
        view.read(str(obj))


def test_a_segment_whose_bytes_the_metadata_does_not_describe_is_refused(tmp_path: Path) -> None:
    from dataclasses import replace

    from segment_io.kafka_tier.segment_check import agrees_with_metadata
    from segment_io.kafka_tier.view import KafkaTierView

    t = tier(PLAIN, tmp_path)
    view, _ = open_storage(kafka_tier_url(str(t.settings), str(t.logdir)))
    assert isinstance(view, KafkaTierView)
    segment = next(iter(view.remote.values()))[1]
    data = segment.read_log()
    agrees_with_metadata(segment, data)  # as the broker wrote it
    segment.seg = replace(segment.seg, end_offset=segment.seg.end_offset - 3)
    with pytest.raises(KafkaTierCorrupt, match=r"outside its metadata's"):
        agrees_with_metadata(segment, data)
    segment.seg = replace(segment.seg, end_offset=segment.seg.end_offset + 3, max_timestamp_ms=1)
    with pytest.raises(KafkaTierCorrupt, match=r"its largest timestamp is \d+, its metadata's 1"):
        agrees_with_metadata(segment, data)


def test_offsets_in_no_segment_are_refused(tmp_path: Path) -> None:
    """A remote segment missing from the metadata leaves a gap: refused, never read past."""
    from segment_io.kafka_tier.extent import require_contiguous

    t = tier(PLAIN, tmp_path)
    storage, _ = open_storage(kafka_tier_url(str(t.settings), str(t.logdir)))
    segs = [s.seg for s in next(iter(storage.remote.values()))]  # type: ignore[attr-defined]
    require_contiguous("kip405-0", segs, [])
    with pytest.raises(KafkaTierCorrupt, match=r"offsets \d+-\d+ are in no remote segment"):
        require_contiguous("kip405-0", segs[:3] + segs[4:], [])
    with pytest.raises(KafkaTierCorrupt, match=r"the remote log ends at \d+ and the local log begins at"):
        require_contiguous("kip405-0", segs, [segs[-1].end_offset + 5])


GCS = (
    "remote.log.storage.manager.class.name=io.aiven.kafka.tieredstorage.RemoteStorageManager\n"
    "rsm.config.storage.backend.class=io.aiven.kafka.tieredstorage.storage.gcs.GcsStorage\n"
    "rsm.config.storage.gcs.bucket.name=tiered\n"
)


def test_aivens_gcs_backend_reads_its_bucket_with_the_credentials_the_plugin_takes(tmp_path: Path) -> None:
    from google.oauth2.credentials import Credentials

    from segment_io.kafka_tier.settings import TierSettings

    def parsed(extra: str) -> TierSettings:
        return TierSettings.parse(GCS + extra, str(tmp_path / "s.properties"))

    plain = parsed("rsm.config.storage.gcs.credentials.default=true\n")
    assert (
        plain.storage_url == "gs://tiered" and plain.storage_setting == "rsm.config.storage.gcs.bucket.name"
    )
    assert plain.storage_options == {"token": "google_default"}  # Google's default chain
    anonymous = parsed(
        "rsm.config.storage.gcs.credentials.default=false\nrsm.config.storage.gcs.endpoint.url=http://127.0.0.1:9/\n"
    )
    assert anonymous.storage_options == {"endpoint_url": "http://127.0.0.1:9/", "token": "anon"}
    account = {"type": "service_account", "client_email": "a@b", "private_key": "k"}
    inline = parsed(f"rsm.config.storage.gcs.credentials.json={json.dumps(account)}\n")
    assert inline.storage_options == {"token": account}
    token = tmp_path / "token.json"
    token.write_text('{"access_token": "ya29.x"}')
    by_file = parsed(f"rsm.config.storage.gcs.credentials.path={token}\n")
    held = by_file.storage_options["token"]
    assert isinstance(held, Credentials) and held.token == "ya29.x" and held.valid
    # The plugin starts with exactly one of the three; segpipe refuses what it would refuse.
    with pytest.raises(KafkaTierSettings, match=r"exactly one of .*\(given: none\)"):
        parsed("")
    with pytest.raises(
        KafkaTierSettings, match=r"given: rsm\.config\.storage\.gcs\.credentials\.path, .*default"
    ):
        parsed(
            f"rsm.config.storage.gcs.credentials.path={token}\nrsm.config.storage.gcs.credentials.default=true\n"
        )
    with pytest.raises(KafkaTierSettings, match=r"credentials\.path=.*missing\.json"):
        parsed(f"rsm.config.storage.gcs.credentials.path={tmp_path / 'missing.json'}\n")
    with pytest.raises(KafkaTierSettings, match=r"credentials\.json: not a JSON credentials document"):
        parsed("rsm.config.storage.gcs.credentials.json=not json\n")


AZURE = (
    "remote.log.storage.manager.class.name=io.aiven.kafka.tieredstorage.RemoteStorageManager\n"
    "rsm.config.storage.backend.class=io.aiven.kafka.tieredstorage.storage.azure.AzureBlobStorage\n"
    "rsm.config.storage.azure.container.name=tiered\n"
)


def test_aivens_azure_backend_reads_its_container_with_the_credentials_the_plugin_takes(
    tmp_path: Path,
) -> None:
    from segment_io.kafka_tier.settings import TierSettings

    def options(extra: str) -> dict[str, object]:
        parsed = TierSettings.parse(AZURE + extra, str(tmp_path / "s.properties"))
        assert parsed.storage_url == "az://tiered"
        assert parsed.storage_setting == "rsm.config.storage.azure.container.name"
        return parsed.storage_options

    a = "rsm.config.storage.azure."
    assert options(f"{a}account.name=acct\n{a}account.key=S2V5\n") == {
        "account_name": "acct",
        "account_key": "S2V5",
    }
    assert options(f"{a}account.name=acct\n{a}sas.token=sv=1&sig=x\n") == {
        "account_name": "acct",
        "sas_token": "sv=1&sig=x",
    }
    # Neither key nor token: Azure's default credential chain, as the plugin's own client.
    assert options(f"{a}account.name=acct\n") == {"account_name": "acct", "anon": False}
    assert options(f"{a}connection.string=UseDevelopmentStorage=true\n") == {
        "connection_string": "UseDevelopmentStorage=true"
    }
    # An endpoint of its own (an emulator's): reached through a connection string that names it.
    at = options(f"{a}account.name=acct\n{a}account.key=S2V5\n{a}endpoint.url=http://127.0.0.1:10000/acct\n")
    assert at == {
        "connection_string": "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=S2V5;"
        "BlobEndpoint=http://127.0.0.1:10000/acct;"
    }
    sas_at = options(f"{a}sas.token=?sv=1&sig=x\n{a}endpoint.url=https://blob.example\n")
    assert sas_at == {
        "connection_string": "BlobEndpoint=https://blob.example;SharedAccessSignature=sv=1&sig=x;"
    }
    # What the plugin refuses to start with, segpipe refuses too, naming the setting.
    with pytest.raises(
        KafkaTierSettings, match=r"connection\.string cannot be set together with .*account\.name"
    ):
        options(f"{a}connection.string=UseDevelopmentStorage=true\n{a}account.name=acct\n")
    with pytest.raises(
        KafkaTierSettings, match=r"connection\.string cannot be set together with .*endpoint\.url"
    ):
        options(f"{a}connection.string=UseDevelopmentStorage=true\n{a}endpoint.url=http://x\n")
    with pytest.raises(KafkaTierSettings, match=r"account\.name and/or .*sas\.token must be set"):
        options(f"{a}account.key=S2V5\n")
    with pytest.raises(KafkaTierSettings, match=r"container\.name is not set"):
        TierSettings.parse(AZURE.replace(f"{a}container.name=tiered\n", "") + f"{a}account.name=x\n", "s")
