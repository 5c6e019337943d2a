"""The remote tier without Spark: manifest versions and their commit rule, verified uploads,
retries, the upload throttle, tier plans and expiry (docs/remote-tier.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipelines.config import JobConfig, TopicConfig
from pipelines.jobs.tier.expire import expire
from pipelines.jobs.tier.plan import plan_tier
from pipelines.output.throttle import Throttle
from segment_io.errors import ManifestConflict, NotALogDirectory, RemoteTierCorrupt, UploadFailed
from segment_io.exit_codes import ExitCode
from segment_io.remote.manifest import PartitionManifest, RemoteObject, RemoteSegment
from segment_io.remote.tier import RemoteTier, SegmentUpload, retrying
from segment_io.storage import LocalStorage, PendingFile
from segment_io.topic_partition import TopicPartition
from tests.scanned import T0, data, segment, txn

pytestmark = pytest.mark.unit
TP = TopicPartition("t", 0)
DAY = 86_400_000


def remote_segment(sid: str, base: int, end: int, ts: int = T0, size: int = 100) -> RemoteSegment:
    return RemoteSegment(sid, base, end, ts, ts, {"log": RemoteObject(f"{base:020d}-{sid}.log", size, 7)})


def test_a_manifest_version_reads_back_as_written() -> None:
    m = PartitionManifest(
        "t",
        0,
        3,
        T0,
        10,
        (remote_segment("a", 10, 19), remote_segment("b", 20, 29)),
        ((0, 0), (2, 15)),
        "topic id\n",
        "tier",
    )
    assert PartitionManifest.from_bytes(m.to_bytes()) == m
    assert m.next_offset == 30
    assert {"00000000000000000010-a.json", "00000000000000000010-a.log"} <= m.object_names


def test_only_one_of_two_writers_that_read_the_same_version_commits(tmp_path: Path) -> None:
    tier = RemoteTier.open(str(tmp_path / "tier"), create=True)
    seen_by_a, seen_by_b = tier.read(TP), tier.read(TP)
    assert seen_by_a.version == 0
    first = seen_by_a.successor(T0, segments=(remote_segment("a", 0, 9),), note="a")
    tier.commit(first)
    with pytest.raises(ManifestConflict) as caught:
        tier.commit(seen_by_b.successor(T0 + 1, segments=(remote_segment("b", 0, 9),), note="b"))
    assert caught.value.exit_code == ExitCode.CONFLICT and "version 1" in str(caught.value)
    # Nothing changed: the first writer's version is the newest, the only one.
    assert tier.versions(TP) == [1] and tier.read(TP) == first


def test_a_prefix_without_the_marker_is_not_a_remote_tier(tmp_path: Path) -> None:
    with pytest.raises(NotALogDirectory, match="not a remote tier"):
        RemoteTier.open(str(tmp_path))


def test_a_damaged_manifest_version_is_refused_not_skipped(tmp_path: Path) -> None:
    tier = RemoteTier.open(str(tmp_path / "tier"), create=True)
    tier.commit(tier.read(TP).successor(T0, segments=(remote_segment("a", 0, 9),)))
    path = Path(tier.version_path(TP, 1))
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(RemoteTierCorrupt, match=r"00000000000000000001\.json"):
        tier.read(TP)


@pytest.mark.parametrize(
    "name", ["../../etc/passwd", "/abs/00000000000000000000-a.log", "..", "x\\..\\y", ""]
)
def test_a_manifest_naming_an_object_outside_its_partition_folder_is_refused(
    tmp_path: Path, name: str
) -> None:
    import json

    tier = RemoteTier.open(str(tmp_path / "tier"), create=True)
    tier.commit(tier.read(TP).successor(T0, segments=(remote_segment("a", 0, 9),)))
    path = Path(tier.version_path(TP, 1))
    body = json.loads(path.read_bytes())
    body["segments"][0]["objects"]["log"]["name"] = name
    path.write_text(json.dumps(body))
    with pytest.raises(
        RemoteTierCorrupt, match=r"00000000000000000001\.json.*not a file name in the partition"
    ):
        tier.read(TP)


class LossyStorage(LocalStorage):
    """A store that keeps all but the last byte of what it is sent."""

    def open_write(self, path: str) -> PendingFile:
        pending = super().open_write(path)
        real_commit = pending.commit

        def commit(mtime_ms: int | None = None) -> None:
            pending.handle.truncate(max(0, pending.handle.tell() - 1))  # type: ignore[attr-defined]
            real_commit(mtime_ms)

        pending.commit = commit  # type: ignore[method-assign]
        return pending


def test_an_upload_is_read_back_and_a_difference_fails_it(tmp_path: Path) -> None:
    source = tmp_path / "00000000000000000000.log"
    source.write_bytes(b"x" * 1000)
    upload = SegmentUpload(TP, 0, 9, T0, T0, (("log", str(source)),))
    good = RemoteTier.open(str(tmp_path / "good"), create=True)
    segment_ = good.upload(LocalStorage(), upload, sleep=lambda s: None)
    assert segment_.objects["log"].size == 1000
    assert Path(good.object_path(TP, segment_.objects["log"].name)).read_bytes() == b"x" * 1000
    RemoteTier.open(str(tmp_path / "lossy"), create=True)
    lossy = RemoteTier(LossyStorage(), str(tmp_path / "lossy"))
    with pytest.raises(UploadFailed, match="999 bytes"):
        lossy.upload(LocalStorage(), upload, sleep=lambda s: None)


def test_transient_errors_are_retried_with_backoff_and_permanent_ones_are_not() -> None:
    waits: list[float] = []
    attempts = iter([ConnectionResetError("dropped"), OSError(5, "503 SlowDown"), "done"])

    def flaky() -> str:
        item = next(attempts)
        if isinstance(item, Exception):
            raise item
        return item

    assert retrying(flaky, "s3://b/k", waits.append) == "done"
    assert len(waits) == 2 and waits[1] >= waits[0] and all(w > 0 for w in waits)
    with pytest.raises(UploadFailed, match="s3://b/k: PermissionError"):
        retrying(lambda: (_ for _ in ()).throw(PermissionError("AccessDenied")), "s3://b/k", waits.append)
    with pytest.raises(UploadFailed, match="after 6 attempts"):
        retrying(lambda: (_ for _ in ()).throw(OSError("500")), "s3://b/k", lambda s: None)


def test_the_throttle_keeps_the_average_rate() -> None:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    throttle = Throttle(1000.0, clock=lambda: now[0], sleep=sleep)
    sent = list(throttle([b"a" * 500] * 6))
    assert len(sent) == 6
    # 3000 bytes at 1000 B/s: the last chunk leaves at 2.5 s (the first at 0 s).
    assert now[0] == pytest.approx(2.5)


def config(**values: object) -> TopicConfig:
    return JobConfig.build({"retention.ms": -1, **values}).defaults


def five_local() -> list:  # type: ignore[type-arg]
    return [segment(k, 10 * k, data(10 * k, 10 * k + 9, ts=T0 + k * DAY)) for k in range(5)]


def test_inactive_segments_below_the_last_stable_offset_are_uploaded_in_order() -> None:
    plan = plan_tier(TP, five_local(), PartitionManifest.empty(TP), config(), None, None, T0)
    # The last segment is active and stays local; every other goes, each ending where the next starts.
    assert [(u.base_offset, u.end_offset) for u in plan.uploads] == [(0, 9), (10, 19), (20, 29), (30, 39)]
    sealed = plan_tier(
        TP,
        five_local(),
        PartitionManifest.empty(TP),
        config(**{"segpipe.last.segment.sealed": True}),
        None,
        None,
        T0,
    )
    assert sealed.uploads[-1].end_offset == 49
    # The high watermark bounds it too.
    capped = plan_tier(TP, five_local(), PartitionManifest.empty(TP), config(), None, 25, T0)
    assert [u.base_offset for u in capped.uploads] == [0, 10]


def test_an_open_transaction_stops_uploads_at_its_first_offset() -> None:
    local = five_local()
    local[1] = segment(1, 10, data(10, 14), txn(15, 19, pid=7))  # never committed nor aborted
    plan = plan_tier(TP, local, PartitionManifest.empty(TP), config(), None, None, T0)
    assert plan.last_stable_offset == 15 and [u.base_offset for u in plan.uploads] == [0]
    assert plan.held_by is not None and (plan.held_by.producer_id, plan.held_by.first_offset) == (7, 15)
    from pipelines.jobs.tier.warnings import tier_warnings

    [line] = tier_warnings([plan], {TP: local}, T0)
    assert line == (
        "t-0: an open transaction (producer id 7, first offset 15) keeps offsets 15 and above from "
        "tiering until its COMMIT or ABORT marker is written"
    )
    # With no transaction open, the active segment alone stays local: nothing is named.
    assert plan_tier(TP, five_local(), PartitionManifest.empty(TP), config(), None, None, T0).held_by is None


def test_what_the_remote_tier_holds_is_not_uploaded_again() -> None:
    remote = PartitionManifest.empty(TP).successor(
        T0, segments=(remote_segment("a", 0, 9), remote_segment("b", 10, 19))
    )
    plan = plan_tier(TP, five_local(), remote, config(), None, None, T0)
    assert [u.base_offset for u in plan.uploads] == [20, 30]
    assert not plan.remote_deleted and not plan.local_deleted


def test_local_release_takes_only_segments_whose_copy_is_remote() -> None:
    # local.retention.ms = 0: every local copy may go, but only what is tiered after this run.
    plan = plan_tier(
        TP,
        five_local(),
        PartitionManifest.empty(TP),
        config(**{"local.retention.ms": 0}),
        None,
        None,
        T0 + 10 * DAY,
    )
    assert [sid for sid, _ in plan.local_released] == [0, 1, 2, 3]
    assert {rule for _, rule in plan.local_released} == {"local_retention_ms"}
    # -2 follows retention.ms (here: unlimited), so nothing is released.
    kept = plan_tier(TP, five_local(), PartitionManifest.empty(TP), config(), None, None, T0 + 10 * DAY)
    assert kept.local_released == []


def test_total_retention_spans_both_tiers() -> None:
    remote = PartitionManifest.empty(TP).successor(
        T0, segments=(remote_segment("a", 0, 9, ts=T0), remote_segment("b", 10, 19, ts=T0 + DAY))
    )
    local = five_local()[2:]  # 20..49 local, 0..19 remote only
    plan = plan_tier(TP, local, remote, config(**{"retention.ms": 2 * DAY}), None, None, T0 + 3 * DAY + 1)
    # 0..9 (T0) and 10..19 (T0+1d) are older than 2 days; 20..29 (T0+2d) is not.
    assert plan.remote_deleted == [("a", "retention_ms"), ("b", "retention_ms")]
    assert plan.log_start_offset == 20 and plan.local_deleted == []


def stamp(path: str | Path, ms: int) -> None:
    """Set a stored object's time (what the store says it was written at)."""
    os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))


def test_expiry_keeps_what_the_newest_version_names_and_waits_out_the_grace_period(tmp_path: Path) -> None:
    tier = RemoteTier.open(str(tmp_path / "tier"), create=True)
    objects = Path(tier.object_path(TP, "x")).parent
    objects.mkdir(parents=True)
    for name in ("00000000000000000000-a.log", "00000000000000000000-b.log", "00000000000000000000-c.log"):
        (objects / name).write_bytes(b"1234")
        stamp(objects / name, T0 + DAY)  # "c" was never referenced: its age is its own time
    v1 = tier.read(TP).successor(T0, segments=(remote_segment("a", 0, 9, size=4),))
    tier.commit(v1)
    stamp(tier.version_path(TP, 1), T0)
    v2 = v1.successor(T0 + DAY, segments=(remote_segment("b", 0, 9, size=4),))
    tier.commit(v2)
    stamp(tier.version_path(TP, 2), T0 + DAY)  # "a" stopped being referenced when the store took v2
    cfg = JobConfig.build({"segpipe.remote.orphan.grace.ms": DAY})
    early = expire(tier.url, cfg, log=lambda line: None, clock=lambda: T0 + DAY + 1000)
    assert early.objects_deleted == 0 and sorted(p.name for p in objects.iterdir())[0].endswith("-a.log")
    late = expire(tier.url, cfg, log=lambda line: None, clock=lambda: T0 + 2 * DAY + 1000)
    assert late.objects_deleted == 2 and late.versions_deleted == 1
    assert sorted(p.name for p in objects.iterdir()) == ["00000000000000000000-b.log"]
    assert tier.versions(TP) == [2] and tier.read(TP) == v2


def test_expiry_counts_from_when_the_store_took_a_version_not_from_a_runs_now(tmp_path: Path) -> None:
    """A run judged "as of 2023" (--now) commits its version today: readers of the version before
    keep their objects for the whole grace period, whatever time the version records."""
    tier = RemoteTier.open(str(tmp_path / "tier"), create=True)
    objects = Path(tier.object_path(TP, "x")).parent
    objects.mkdir(parents=True)
    for name in ("00000000000000000000-a.log", "00000000000000000000-b.log"):
        (objects / name).write_bytes(b"1234")
    v1 = tier.read(TP).successor(T0, segments=(remote_segment("a", 0, 9, size=4),))
    tier.commit(v1)
    tier.commit(v1.successor(T0, segments=(remote_segment("b", 0, 9, size=4),)))  # recorded: years ago
    today = int(Path(tier.version_path(TP, 2)).stat().st_mtime * 1000)
    cfg = JobConfig.build({"segpipe.remote.orphan.grace.ms": DAY})
    result = expire(tier.url, cfg, log=lambda line: None, clock=lambda: today + 60_000)
    assert (result.objects_deleted, result.versions_deleted, result.objects_kept) == (0, 0, 1)
    assert len(list(objects.iterdir())) == 2 and tier.versions(TP) == [1, 2]
    later = expire(tier.url, cfg, log=lambda line: None, clock=lambda: today + DAY + 60_000)
    assert (later.objects_deleted, later.versions_deleted) == (1, 1)


def merged_local() -> list:  # type: ignore[type-arg]
    """Five segments of ten offsets after a local compaction merged the first three: [0, 29]."""
    return [
        segment(0, 0, data(0, 29, ts=T0), size=150),
        segment(3, 30, data(30, 39, ts=T0 + 3 * DAY)),
        segment(4, 40, data(40, 49, ts=T0 + 4 * DAY)),
    ]


def test_a_local_segment_that_replaces_remote_ones_is_uploaded_and_supersedes_them() -> None:
    # Tiered while it was 0..19 (two segments), then compacted locally: [0, 29] is no copy of
    # anything remote and reaches past the remote end. It is never counted as remote: it is
    # uploaded, and its version supersedes the two segments it covers.
    remote = PartitionManifest.empty(TP).successor(
        T0, segments=(remote_segment("a", 0, 9), remote_segment("b", 10, 19))
    )
    plan = plan_tier(
        TP, merged_local(), remote, config(**{"local.retention.ms": 0}), None, None, T0 + 9 * DAY
    )
    assert [(u.base_offset, u.end_offset) for u in plan.uploads] == [(0, 29), (30, 39)]
    assert plan.remote_superseded == ["a", "b"] and plan.held is None
    assert [sid for sid, _ in plan.local_released] == [0, 3] and not plan.local_deleted


def test_a_replacing_segment_that_cannot_be_uploaded_yet_holds_the_partition() -> None:
    remote = PartitionManifest.empty(TP).successor(
        T0, segments=(remote_segment("a", 0, 9), remote_segment("b", 10, 19))
    )
    active = [segment(0, 0, data(0, 29, ts=T0), size=150)]  # the merged segment is the active one
    plan = plan_tier(TP, active, remote, config(**{"local.retention.ms": 0}), None, None, T0 + 9 * DAY)
    assert plan.held is not None and "can be uploaded" in plan.held
    assert not (plan.uploads or plan.local_released or plan.local_deleted or plan.remote_superseded)


def test_a_local_segment_that_overlaps_remote_ones_unevenly_is_held_not_released() -> None:
    remote = PartitionManifest.empty(TP).successor(
        T0, segments=(remote_segment("a", 0, 9), remote_segment("b", 10, 19))
    )
    local = [segment(0, 5, data(5, 24, ts=T0), size=150), *five_local()[3:]]
    local = [segment(0, 0, data(0, 4)), *local]  # [0, 4] is no copy of "a" either
    plan = plan_tier(TP, local, remote, config(**{"local.retention.ms": 0}), None, None, T0 + 9 * DAY)
    assert plan.held is None and plan.remote_superseded == ["a", "b"]  # from 0: aligned with "a"
    uneven = [segment(1, 5, data(5, 24, ts=T0), size=150), *five_local()[3:]]
    held = plan_tier(TP, uneven, remote, config(**{"local.retention.ms": 0}), 5, None, T0 + 9 * DAY)
    assert held.held is not None and "does not start where" in held.held
    assert not (held.uploads or held.local_released or held.local_deleted or held.remote_deleted)


def test_only_a_copy_with_the_same_range_and_size_counts_as_remote() -> None:
    remote = PartitionManifest.empty(TP).successor(
        T0, segments=(remote_segment("a", 0, 9), remote_segment("b", 10, 19, size=99))
    )
    plan = plan_tier(TP, five_local(), remote, config(**{"local.retention.ms": 0}), None, None, T0 + 9 * DAY)
    # "b" is not the local [10, 19] (another size): from 10 on the local log replaces the remote one.
    assert plan.remote_superseded == ["b"]
    assert [u.base_offset for u in plan.uploads] == [10, 20, 30]


def test_local_segments_an_in_place_clean_compacted_are_neither_replacements_nor_copies() -> None:
    from dataclasses import replace

    from segment_io.remote.manifest import ORIGIN_CLEAN, ORIGIN_ERASE

    compacted = (remote_segment("c", 0, 19, size=60), remote_segment("d", 20, 29, size=40))
    remote = PartitionManifest.empty(TP).successor(
        T0, segments=tuple(replace(s, origin=ORIGIN_CLEAN) for s in compacted)
    )
    assert (
        remote.rewritten_in_tier(0, 30)
        and remote.rewritten_in_tier(10, 20)
        and not remote.rewritten_in_tier(0, 31)
    )
    erased = PartitionManifest.empty(TP).successor(
        T0, segments=tuple(replace(s, origin=ORIGIN_ERASE) for s in compacted)
    )
    assert erased.rewritten_in_tier(0, 30)  # an in-place erase's segments too
    plan = plan_tier(TP, five_local(), remote, config(**{"local.retention.ms": 0}), None, None, T0 + 9 * DAY)
    # The local [0, 29] is an older form of what the tier holds: not uploaded over it, nothing superseded.
    assert plan.held is None and not plan.remote_superseded
    assert [u.base_offset for u in plan.uploads] == [30]
    assert PartitionManifest.from_bytes(remote.to_bytes()) == remote
