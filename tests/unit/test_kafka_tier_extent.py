"""A Kafka tier's extent proved from witnesses that do not lean on one another (the broker's
checkpoints and local segments, the remote log metadata, the metadata topic's own log, the
storage's objects): on copies of the fixtures, every way the metadata can lose part of the log is
refused with the offsets named, never read as a shorter log; orphans are named and not read; a
settings file that points at the wrong place is a settings error."""

from __future__ import annotations

import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from segment_io.errors import KafkaTierCorrupt, KafkaTierSettings
from segment_io.kafka_tier.extent import require_log_start
from segment_io.kafka_tier.metadata import SegmentMetadata, SegmentState, TopicIdPartition
from segment_io.kafka_tier.metadata_cache import PartitionState
from segment_io.kafka_tier.url import kafka_tier_url
from segment_io.storage import open_storage
from segment_io.topic_partition import TopicPartition
from tests.kip405 import ENCRYPTED, PLAIN, Tier, records, tier

pytestmark = pytest.mark.unit
METADATA_LOG = "__remote_log_metadata-0/00000000000000000000.log"


def read(t: Tier) -> dict[tuple[int, int], tuple[bytes, bytes]]:
    storage, root = open_storage(kafka_tier_url(str(t.settings), str(t.logdir)))
    return records(storage, root)


def keep_batches(path: Path, keep: Callable[[int], bool]) -> None:
    """Rewrite a log keeping only the batches (by position, from 0) `keep` takes; the indexes of
    the partition go, as after a copy that lost them."""
    data, out, pos, i = path.read_bytes(), bytearray(), 0, 0
    while pos + 12 <= len(data):
        end = pos + 12 + struct.unpack(">i", data[pos + 8 : pos + 12])[0]
        if keep(i):
            out += data[pos:end]
        pos, i = end, i + 1
    path.write_bytes(bytes(out))
    for index in path.parent.glob("*index"):
        index.unlink()


def test_the_metadata_partitions_gone_is_refused_naming_the_offsets_in_neither_tier(tmp_path: Path) -> None:
    t = tier(PLAIN, tmp_path, copy_logdir=True)
    shutil.rmtree(t.logdir / "__remote_log_metadata-0")
    with pytest.raises(
        KafkaTierCorrupt, match=r"starts at 0, its local segments at 20000.* 0-19999 are in neither"
    ):
        read(t)


def test_a_metadata_log_whose_first_records_are_gone_is_refused(tmp_path: Path) -> None:
    t = tier(ENCRYPTED, tmp_path, copy_logdir=True)
    keep_batches(t.logdir / METADATA_LOG, lambda i: i >= 10)
    with pytest.raises(
        KafkaTierCorrupt,
        match=r"__remote_log_metadata-0 begins at offset \d+, not at 0 \(the topic keeps every record",
    ):
        read(t)


def test_a_metadata_log_with_a_retention_limit_may_begin_at_its_first_segment(tmp_path: Path) -> None:
    """With a retention limit the metadata log may begin above 0; then the gap it leaves in the
    topic's log is what refuses the read (the checkpoint says the topic starts at 0)."""
    t = tier(
        PLAIN, tmp_path, copy_logdir=True, extra="\nrlmm.config.remote.log.metadata.topic.retention.ms=1000\n"
    )
    keep_batches(t.logdir / METADATA_LOG, lambda i: i >= 10)
    segment = t.logdir / METADATA_LOG
    segment.rename(segment.with_name(f"{10:020d}.log"))
    with pytest.raises(
        KafkaTierCorrupt, match=r"starts at 0, the first remote segment .* at \d+: offsets 0-\d+ are in no"
    ):
        read(t)


def test_a_metadata_log_whose_last_records_are_gone_is_refused(tmp_path: Path) -> None:
    t = tier(PLAIN, tmp_path, copy_logdir=True)
    keep_batches(t.logdir / METADATA_LOG, lambda i: i < 60)
    with pytest.raises(
        KafkaTierCorrupt, match=r"the remote log ends at \d+ and the local log begins at 20000"
    ):
        read(t)


def test_one_segments_records_missing_from_the_metadata_is_refused(tmp_path: Path) -> None:
    t = tier(PLAIN, tmp_path, copy_logdir=True)
    keep_batches(t.logdir / METADATA_LOG, lambda i: i not in (20, 21))  # one segment's two records
    with pytest.raises(KafkaTierCorrupt, match=r"offsets \d+-\d+ are in no remote segment"):
        read(t)


def test_an_orphan_object_is_named_and_not_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = tier(PLAIN, tmp_path, copy_bucket=True)
    log = sorted(t.bucket.rglob("*.log"))[4]
    start = log.name.split("-", 1)[0]
    orphan = "Z" * 22
    for suffix in (".log", ".indexes"):  # a failed upload: its manifest never written
        shutil.copy(log.with_suffix(suffix), log.with_name(f"{start}-{orphan}{suffix}"))
    assert read(t) == t.produced
    err = capsys.readouterr().err
    assert (
        f"{orphan} (from offset {int(start)}; indexes, log): the remote log metadata does not know it" in err
    )
    assert "1 segment(s) in the remote storage are not part of the log the broker serves" in err


def _segment(start: int, end: int) -> SegmentMetadata:
    tip = TopicIdPartition("t", "A" * 22, 0)
    return SegmentMetadata(
        tip, f"{start:022d}", start, end, 1, 0, 0, ((0, start),), 10, None, SegmentState.COPY_SEGMENT_FINISHED
    )


def test_a_log_start_below_segments_retention_deleted_is_a_note_not_a_refusal() -> None:
    tp, served = TopicPartition("t", 0), [_segment(200, 299)]
    state = PartitionState(expired=[(0, 99), (100, 199)])
    note = require_log_start(tp, 0, served, [300], state, "t-0")
    assert note is not None and "offsets 0-199 were deleted by remote retention" in note
    assert require_log_start(tp, 250, served, [300], state, "t-0") is None
    with pytest.raises(KafkaTierCorrupt, match=r"offsets 0-199 are in no segment"):
        require_log_start(tp, 0, served, [300], PartitionState(expired=[(0, 99)]), "t-0")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda text, bucket: text.replace(str(bucket), "${BUCKET}"),
            r"rsm.config.storage.root=\$\{BUCKET\} holds a placeholder nobody filled in",
        ),
        (
            lambda text, bucket: text.replace(str(bucket), str(bucket) + "-nowhere"),
            r"rsm.config.storage.root=\S+-nowhere: nothing is there",
        ),
    ],
)
def test_settings_that_point_nowhere_are_settings_errors(
    change: Callable[[str, Path], str], message: str, tmp_path: Path
) -> None:
    t = tier(PLAIN, tmp_path)
    t.settings.write_text(change(t.settings.read_text(), t.bucket))
    with pytest.raises(KafkaTierSettings, match=message):
        read(t)


def test_another_clusters_bucket_is_a_settings_error_naming_the_setting(tmp_path: Path) -> None:
    t = tier(PLAIN, tmp_path, copy_bucket=True)
    for topic_dir in t.bucket.iterdir():  # the same topic name, another topic id
        topic_dir.rename(t.bucket / "kip405-BBBBBBBBBBBBBBBBBBBBBB")
    with pytest.raises(
        KafkaTierSettings, match=r"rsm.config.storage.root=\S+ holds no object of topic kip405 \(id CZwgEIL"
    ):
        read(t)


@pytest.mark.parametrize("name", [PLAIN, ENCRYPTED])
@pytest.mark.parametrize("chunk", ["producerSnapshot", "leaderEpoch", "offset", "timestamp"])
def test_a_damaged_index_chunk_is_found_by_a_verifying_read(name: str, chunk: str, tmp_path: Path) -> None:
    """inspect and validate read the view with `verify`: every index chunk of every segment is
    read back (decrypted where encrypted) and checked, not only those a read would use."""
    import json

    t = tier(name, tmp_path, copy_bucket=True)
    manifest = sorted(t.bucket.rglob("*.rsm-manifest"))[3]
    where = json.loads(manifest.read_bytes())["segmentIndexes"][chunk]
    indexes = manifest.with_suffix(".indexes")
    data = bytearray(indexes.read_bytes())
    data[where["position"] + where["size"] // 2] ^= 0x01
    indexes.write_bytes(bytes(data))
    storage, root = open_storage(kafka_tier_url(str(t.settings), str(t.logdir), verify=True))
    if name == PLAIN and chunk in ("offset", "timestamp"):
        # A plain index's bytes are whole entries either way: inspect checks each against the log.
        from segment_io.partition import inspect_log_dir

        _, reports = inspect_log_dir(storage, root)
        errors = [e for r in reports for seg in r.segments for e in seg.errors]
        assert errors, "a damaged index went unnoticed"
        return
    with pytest.raises(KafkaTierCorrupt, match=manifest.stem.split("-", 1)[1]) as info:
        for part in ("kip405-0", "kip405-1"):
            storage.list(f"{root}/{part}")
    assert info.value.path.startswith(str(indexes))


def read_from_bucket(t: Tier) -> dict[tuple[int, int], tuple[bytes, bytes]]:
    storage, root = open_storage(kafka_tier_url(str(t.settings), str(t.logdir), from_bucket=True))
    return records(storage, root)


@pytest.mark.parametrize("name", [PLAIN, ENCRYPTED])
def test_a_topic_is_rebuilt_from_its_bucket_alone(name: str, tmp_path: Path) -> None:
    """The metadata partitions gone: the segments, offsets and leader epochs from the manifests,
    every record read back exactly, from offset 0."""
    t = tier(name, tmp_path, copy_logdir=True)
    shutil.rmtree(t.logdir / "__remote_log_metadata-0")
    assert read_from_bucket(t) == t.produced


def test_the_bucket_and_the_metadata_topic_are_compared_where_both_are_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t = tier(PLAIN, tmp_path, copy_logdir=True)
    assert read_from_bucket(t) == t.produced
    assert "disagree" not in capsys.readouterr().err  # the same segments, whole
    keep_batches(t.logdir / METADATA_LOG, lambda i: i >= 10)  # the metadata lost its first five segments
    assert read_from_bucket(t) == t.produced
    err = capsys.readouterr().err
    assert "the metadata topic and the storage's objects disagree" in err
    assert "kip405-0: only the metadata topic serves []; only the storage [" in err


def test_a_half_deleted_segment_in_the_bucket_is_not_read_and_its_offsets_are_refused(tmp_path: Path) -> None:
    t = tier(PLAIN, tmp_path, copy_bucket=True, copy_logdir=True)
    shutil.rmtree(t.logdir / "__remote_log_metadata-0")
    manifest = sorted(t.bucket.rglob("*.rsm-manifest"))[6]
    manifest.with_suffix(".log").unlink()  # its deletion stopped half way
    with pytest.raises(KafkaTierCorrupt, match=r"offsets \d+-\d+ are in no remote segment"):
        read_from_bucket(t)


def test_a_manifest_that_contradicts_its_name_is_refused(tmp_path: Path) -> None:
    import json

    t = tier(PLAIN, tmp_path, copy_bucket=True, copy_logdir=True)
    shutil.rmtree(t.logdir / "__remote_log_metadata-0")
    manifest = sorted(t.bucket.rglob("*.rsm-manifest"))[2]
    doc = json.loads(manifest.read_bytes())
    doc["remoteLogSegmentMetadata"]["startOffset"] += 1
    manifest.write_text(json.dumps(doc))
    with pytest.raises(KafkaTierCorrupt, match="which one it is cannot be told"):
        read_from_bucket(t)


def test_a_tiered_partition_whose_directory_is_gone_is_refused_where_the_broker_says_it_reached_further(
    tmp_path: Path,
) -> None:
    """The partition directory lost, the remote log ends at 19999: the broker's high watermark and
    recovery point (20000) say no record is missing, and the read stands; had the broker's log
    reached further, the offsets between would be in neither tier."""
    t = tier(PLAIN, tmp_path, copy_logdir=True)
    shutil.rmtree(t.logdir / "kip405-0")
    assert read(t) == t.produced
    for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
        path = t.logdir / name
        path.write_text(path.read_text().replace("kip405 0 20000", "kip405 0 20100"))
    with pytest.raises(
        KafkaTierCorrupt, match=r"reached 20100, its remote log ends at 19999 .* 20000-20099 are in neither"
    ):
        read(t)


def test_a_segment_a_new_leader_uploaded_again_replaces_the_old_copy_when_rebuilt_from_the_bucket(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka's rule: the later upload of a segment's offsets in the same epoch replaces the earlier
    one. The same bytes under a new id, uploaded later: that one is read, the old named."""
    import json

    t = tier(PLAIN, tmp_path, copy_bucket=True, copy_logdir=True)
    shutil.rmtree(t.logdir / "__remote_log_metadata-0")
    manifest = sorted(t.bucket.rglob("*.rsm-manifest"))[5]
    start, old_id = manifest.stem.split("-", 1)
    new_id = "N" * 22
    doc = json.loads(manifest.read_bytes())
    doc["remoteLogSegmentMetadata"]["remoteLogSegmentId"]["id"] = new_id
    doc["remoteLogSegmentMetadata"]["eventTimestampMs"] += 1000
    manifest.with_name(f"{start}-{new_id}.rsm-manifest").write_text(json.dumps(doc))
    for suffix in (".log", ".indexes"):
        shutil.copy(manifest.with_suffix(suffix), manifest.with_name(f"{start}-{new_id}{suffix}"))
    manifest.with_suffix(".log").write_bytes(
        b"\0" * manifest.with_suffix(".log").stat().st_size
    )  # never read
    assert read_from_bucket(t) == t.produced
    assert (
        f"{old_id} (from offset {int(start)}; indexes, log, rsm-manifest): another segment serves"
        in capsys.readouterr().err
    )


def test_remote_segments_of_another_topic_of_the_same_name_are_not_read(tmp_path: Path) -> None:
    """The local partition.metadata names the topic id: a metadata topic that only knows an older
    topic of the same name (deleted and created again) serves none of its segments to this one,
    and the log that is left is refused, not read as another topic's."""
    t = tier(PLAIN, tmp_path, copy_logdir=True)
    meta = t.logdir / "kip405-0" / "partition.metadata"
    meta.write_text("version: 0\ntopic_id: BBBBBBBBBBBBBBBBBBBBBB\n")
    with pytest.raises(KafkaTierCorrupt, match=r"has no segment of it: offsets 0-19999 are in neither tier"):
        read(t)
