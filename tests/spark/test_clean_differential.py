"""`clean` on generated data against an obviously-correct model written here: plain Python over
the records, following the spec's rules for a first pass and a later second pass."""

from __future__ import annotations

import json
import struct
from collections import defaultdict
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords

import pipelines
from pipelines.config import JobConfig
from segment_io.generate import generate_log_dir
from segment_io.generate_spec import DEFAULT_START_MS, TopicSpec
from segment_io.layout import META_DIR
from segment_io.partition import inspect_log_dir
from segment_io.storage import open_storage
from tests.helpers import files_of, read_log

pytestmark = pytest.mark.spark

SPAN = 7 * 24 * 3600 * 1000
NOW1 = DEFAULT_START_MS + SPAN + 3_600_000
NOW2 = NOW1 + 86_400_000  # exactly the default delete.retention.ms later
SPECS = [
    TopicSpec("orders", partitions=2, records=1500, keys=150, segment_bytes=24 * 1024, span_ms=SPAN),
    TopicSpec(
        "users",
        records=1200,
        keys=400,
        null_key_ratio=0.05,
        tombstone_ratio=0.15,
        segment_bytes=16 * 1024,
        transactional_ratio=0.35,
        span_ms=SPAN,
    ),
    TopicSpec(
        "clicks",
        records=1000,
        keys=1000,
        log_append_time=True,
        transactional_ratio=0.0,
        tombstone_ratio=0.0,
        codecs=("lz4", "zstd"),
        segment_bytes=16 * 1024,
        span_ms=SPAN,
    ),
    TopicSpec(
        "old",
        records=300,
        keys=40,
        legacy_magic=1,
        transactional_ratio=0.0,
        idempotent_ratio=0.0,
        header_ratio=0.0,
        codecs=("none", "gzip", "snappy"),
        segment_bytes=8 * 1024,
        span_ms=SPAN,
    ),
]
TOPICS = {
    "orders": {"cleanup.policy": "compact"},
    "users": {"cleanup.policy": "compact", "segpipe.last.segment.sealed": True},
    "clicks": {"cleanup.policy": "delete", "retention.ms": 3 * 24 * 3600 * 1000},
    "old": {"cleanup.policy": "compact", "segpipe.last.segment.sealed": True},
}
CONFIG = JobConfig.build({"retention.ms": -1}, TOPICS)


def segment_bases(root: Path, part: str) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in (root / part).glob("*.log"))


def first_uncleanable(rows: list[dict], bases: list[int], sealed: bool) -> int:
    """Active segment (unless sealed) and open transactions bound the range; snapped to a segment."""
    leo = max(r["batch_last_offset"] for r in rows) + 1
    bound = leo if sealed else bases[-1]
    open_first: dict[int, int | None] = {}
    for r in rows:
        if r["is_transactional"]:
            if r["is_control"]:
                open_first[r["producer_id"]] = None
            elif open_first.get(r["producer_id"]) is None:
                open_first[r["producer_id"]] = r["batch_base_offset"]
    bound = min([bound] + [o for o in open_first.values() if o is not None])
    if bound >= leo:
        return leo
    return max(b for b in bases if b <= bound)


def aborted_offsets(rows: list[dict]) -> set[int]:
    """Data of a transaction whose producer's next marker is ABORT."""
    out: set[int] = set()
    pending: dict[int, list[int]] = defaultdict(list)
    for r in rows:
        if not r["is_transactional"]:
            continue
        pid = r["producer_id"]
        if r["is_control"]:
            if struct.unpack(">hh", r["key"])[1] == 0:
                out.update(pending[pid])
            pending[pid] = []
        else:
            pending[pid].append(r["offset"])
    return out


def model_compaction(rows: list[dict], upper: int) -> list[dict]:
    aborted = aborted_offsets(rows)
    latest: dict[bytes, int] = {}
    for r in rows:
        if (
            r["offset"] < upper
            and not r["is_control"]
            and r["offset"] not in aborted
            and r["key"] is not None
        ):
            latest[r["key"]] = max(latest.get(r["key"], -1), r["offset"])
    keep = []
    for r in rows:
        if (
            r["offset"] >= upper
            or r["is_control"]
            or (r["offset"] not in aborted and r["key"] is not None and latest[r["key"]] == r["offset"])
        ):
            keep.append(r)
    return keep


def model_time_retention(rows: list[dict], bases: list[int], retention_ms: int, now: int) -> list[dict]:
    # A segment's largest timestamp: the max record timestamp as a consumer sees it.
    max_ts = {b: max(r["timestamp"] for r in rows if r["segment_base_offset"] == b) for b in bases}
    gone = set()
    for b in bases:
        if now - max_ts[b] > retention_ms:
            gone.add(b)
        else:
            break
    return [r for r in rows if r["segment_base_offset"] not in gone]


def view(rows: list[dict]) -> list[tuple]:
    return [
        (r["offset"], r["key"], r["value"], r["timestamp"], r["is_control"], str(r["headers"])) for r in rows
    ]


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:  # type: ignore[no-untyped-def]
    base = tmp_path_factory.mktemp("diff")
    storage, src = open_storage(str(base / "src"))
    generate_log_dir(storage, src, SPECS, seed=11)
    pipelines.clean(spark, str(base / "src"), str(base / "out1"), CONFIG, now_ms=NOW1)
    pipelines.clean(spark, str(base / "out1"), str(base / "out2"), CONFIG, now_ms=NOW2)
    return base / "src", base / "out1", base / "out2"


PARTITIONS = ["orders-0", "orders-1", "users-0", "old-0"]


def source(src: Path, part: str) -> tuple[list[dict], int]:
    """A source partition's records and the first uncleanable offset the model derives for it."""
    rows = read_log(src, part)
    sealed = bool(TOPICS[part.rsplit("-", 1)[0]].get("segpipe.last.segment.sealed"))
    return rows, first_uncleanable(rows, segment_bases(src, part), sealed)


@pytest.mark.parametrize("part", PARTITIONS)
def test_first_pass_matches_the_model(runs: tuple[Path, Path, Path], part: str) -> None:
    src, out1, _ = runs
    rows, upper = source(src, part)
    expected = model_compaction(rows, upper)
    got = read_log(out1, part)
    assert view(got) == view(expected)
    assert len(got) < len(rows)  # something was actually removed


def test_time_retention_matches_the_model(runs: tuple[Path, Path, Path]) -> None:
    src, out1, _ = runs
    rows = read_log(src, "clicks-0")
    expected = model_time_retention(rows, segment_bases(src, "clicks-0"), 3 * 24 * 3600 * 1000, NOW1)
    assert 0 < len(expected) < len(rows)
    assert view(read_log(out1, "clicks-0")) == view(expected)


@pytest.mark.parametrize("part", PARTITIONS)
def test_second_pass_removes_expired_tombstones(runs: tuple[Path, Path, Path], part: str) -> None:
    src, out1, out2 = runs
    rows1 = read_log(out1, part)
    _, upper = source(src, part)
    expired = {
        r["offset"]
        for r in rows1
        if not r["is_control"]
        and r["value"] is None
        and r["offset"] < upper
        and r["delete_horizon_ms"] is not None
        and r["delete_horizon_ms"] <= NOW2
    }
    data2 = [r for r in read_log(out2, part) if not r["is_control"]]
    assert view(data2) == view([r for r in rows1 if not r["is_control"] and r["offset"] not in expired])
    if part.startswith("users"):
        assert expired, "the tombstone-heavy topic must lose tombstones on the second pass"


def test_kafka_python_reads_every_output_batch_and_indexes_validate(runs: tuple[Path, Path, Path]) -> None:
    for root in runs[1:]:
        storage, path = open_storage(str(root))
        _, reports = inspect_log_dir(storage, path)
        assert reports and all(r.ok for r in reports), [r.errors for r in reports]
        for log in root.glob("*/*.log"):
            records = MemoryRecords(log.read_bytes())
            theirs = []
            while records.has_next():
                batch = records.next_batch()
                assert isinstance(batch, DefaultRecordBatch) and batch.validate_crc()
                theirs += [(r.offset, r.key, r.value) for r in batch]
            part = log.parent.name
            ours = [
                (r["offset"], r["key"], r["value"])
                for r in read_log(root, part)
                if r["segment_base_offset"] == int(log.stem)
            ]
            assert theirs == ours


@pytest.mark.parametrize("part", PARTITIONS)
def test_report_counts_removals_by_reason_like_the_model(runs: tuple[Path, Path, Path], part: str) -> None:
    """Batches in which nothing survives are dropped unread; the report must still say why."""
    src, out1, _ = runs
    rows, upper = source(src, part)
    aborted = aborted_offsets(rows)
    kept = {r["offset"] for r in model_compaction(rows, upper)}
    cleaned = [r for r in rows if r["offset"] < upper and not r["is_control"]]
    null_keys = sum(1 for r in cleaned if r["key"] is None and r["offset"] not in aborted)
    superseded = sum(
        1 for r in cleaned if r["key"] is not None and r["offset"] not in aborted and r["offset"] not in kept
    )
    report = json.loads((out1 / META_DIR / "report.json").read_text())
    got = next(p for p in report["partitions"] if p["partition"] == part)
    assert (got["removed_null_key"], got["removed_superseded"]) == (null_keys, superseded)
    assert got["removed_aborted"] == sum(1 for r in cleaned if r["offset"] in aborted)
    assert got["records_in"] == len(rows) and got["records_out"] == len(read_log(out1, part))


@pytest.mark.parametrize(
    ("alone_rows", "limits", "on_spark"),
    [
        (None, {}, True),
        (-1, {}, True),
        (-1, {"TABLE_ROWS": 7}, True),
        (700, {}, True),
        (None, {"CACHE_BYTES": 0}, False),
        (None, {"FLUSH_ROWS": 60}, False),
    ],
)
def test_a_partition_compacted_in_one_task_or_through_the_shuffle_is_the_same(  # type: ignore[no-untyped-def]
    spark,
    runs: tuple[Path, Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    alone_rows: int | None,
    limits: dict[str, int],
    on_spark: bool,
) -> None:
    """The runs above compact each partition in the driver's threads (they are small); as Spark
    tasks, each partition inside one task (None), forced through the bucketed shuffle (-1), there
    with each bucket's keys split over tables of about 7 keys, with only the partitions of at
    most 700 keyed records alone (a mix in one run); or in the driver's threads again, where
    these limits apply, with a cache of decoded records that is full after its first chunk (the
    rest decoded twice), or with a key table flushed every 60 rows (the cache then holds more
    than the survivors): both passes write the same bytes and count the same removals."""
    from pipelines.config.tuning import DRIVER_WORK
    from pipelines.jobs.clean import alone, job, keymap, record_cache

    src, out1, out2 = runs
    if alone_rows is not None:
        monkeypatch.setattr(alone, "ALONE_ROWS", alone_rows)
    if on_spark:
        monkeypatch.setenv(DRIVER_WORK.env, "off")
    where = {"CACHE_BYTES": record_cache, "FLUSH_ROWS": keymap, "TABLE_ROWS": job}
    for name, value in limits.items():
        monkeypatch.setattr(where[name], name, value)
    sizes: list[tuple[int, int]] = []  # (buckets, tables a bucket) of each shuffled key map
    count = job._bucket_count
    monkeypatch.setattr(job, "_bucket_count", lambda *a: sizes.append(count(*a)) or sizes[-1])
    pipelines.clean(spark, str(src), str(tmp_path / "out1"), CONFIG, now_ms=NOW1)
    pipelines.clean(spark, str(tmp_path / "out1"), str(tmp_path / "out2"), CONFIG, now_ms=NOW2)
    if alone_rows == -1:
        assert sizes and all(tables > 1 for _, tables in sizes) == ("TABLE_ROWS" in limits), sizes
    assert files_of(tmp_path / "out1") == files_of(out1)
    assert files_of(tmp_path / "out2") == files_of(out2)
    for ours, theirs in ((tmp_path / "out1", out1), (tmp_path / "out2", out2)):
        assert removals(ours) == removals(theirs)


def removals(root: Path) -> dict[str, tuple[int, ...]]:
    """Each partition's record counts from a run's report, by reason."""
    report = json.loads((root / META_DIR / "report.json").read_text())
    names = (
        "records_in",
        "records_out",
        "removed_null_key",
        "removed_superseded",
        "removed_tombstone",
        "removed_aborted",
    )
    return {p["partition"]: tuple(p[n] for n in names) for p in report["partitions"]}
