"""The structure suites: a log with one partition broken in each way trips exactly that rule on
exactly that partition; its good twin and a real cleaned output pass; Data Docs are written."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from pipelines import clean
from pipelines.config import JobConfig
from pipelines.jobs.validate import validate
from segment_io.format.constants import CONTROL_MASK, TRANSACTIONAL_MASK
from tests.conftest import FIXED_NOW_MS
from tests.helpers import read_log, rewrite_partition, v2_batch, write_log

pytestmark = pytest.mark.spark
T = 1_700_000_000_000


def keyed(base: int, *keys: bytes | None, ts: int = T) -> bytes:
    return v2_batch(base, [(i, ts + i, k, b"v", []) for i, k in enumerate(keys)])


def good(root: Path, name: str) -> None:
    write_log(root, name, [[keyed(0, b"a", b"b"), keyed(2, b"c")], [keyed(3, b"d", b"e")]])


def broken_log(root: Path) -> dict[str, str]:
    """One partition per rule, each broken in that way only; returns partition -> rule."""
    good(root, "good-0")
    write_log(root, "dupkey-0", [[keyed(0, b"a", b"b"), keyed(2, b"a")], [keyed(3, b"x")]])
    write_log(root, "nullkey-0", [[keyed(0, b"a", None), keyed(2, b"c")], [keyed(3, b"x")]])
    write_log(root, "ts-0", [[keyed(0, b"a"), keyed(1, b"b", ts=-5)]])
    write_log(root, "gap-0", [[keyed(0, b"a", b"b")], [keyed(3, b"d")]])  # offset 2 is missing
    control = v2_batch(
        1, [(0, T, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", [])], attributes=CONTROL_MASK
    )
    write_log(root, "control-0", [[keyed(0, b"a"), control]])
    good(root, "start-0")
    good(root, "crc-0")
    log = root / "crc-0" / f"{0:020d}.log"
    data = bytearray(log.read_bytes())
    data[-3] ^= 0xFF  # a value byte of the last batch: its CRC no longer matches
    log.write_bytes(bytes(data))
    good(root, "index-0")
    index = root / "index-0" / f"{0:020d}.index"
    index.write_bytes(b"\x00\x00\x00\x05\x00\x00\x10\x00")  # offset 5 at byte 4096: past the log's end
    (root / "cleaner-offset-checkpoint").write_text("0\n2\ndupkey 0 3\nnullkey 0 3\n")
    (root / "log-start-offset-checkpoint").write_text("0\n1\nstart 0 2\n")
    return {
        "dupkey-0": "key_unique_in_cleaned_section",
        "nullkey-0": "key_not_null_in_cleaned_section",
        "ts-0": "timestamp_non_negative",
        "gap-0": "offsets_contiguous",
        "control-0": "control_on_transactional",
        "start-0": "offset_in_bounds",
        "crc-0": "batches_crc_valid",
        "index-0": "indexes_consistent",
    }


@pytest.fixture(params=["driver", "spark"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Small logs are read and judged in the driver; `spark` forces every step onto Spark's
    workers and GE's Spark engine, as for a large log: both must reach the same verdicts."""
    if request.param == "spark":
        from pipelines.jobs.validate import frames
        from pipelines.runtime import tasks

        monkeypatch.setattr(tasks, "DRIVER_BYTES", -1)
        monkeypatch.setattr(tasks, "DRIVER_ROW_BYTES", -1)
        monkeypatch.setattr(frames, "DRIVER_ROWS", -1)
    return str(request.param)


def test_each_broken_partition_trips_exactly_its_rule(spark, tmp_path: Path, engine: str) -> None:  # type: ignore[no-untyped-def]
    expected = broken_log(tmp_path / "log")
    docs = tmp_path / "docs"
    report = validate(spark, str(tmp_path / "log"), report_dir=str(docs))
    assert not report.success
    tripped = {(f.partition, f.rule) for f in report.failures}
    assert tripped == {(p, r) for p, r in expected.items()}, tripped
    # Every failure names its row: the duplicated key and where it is.
    dup = sorted((f.offset, f.key) for f in report.failures if f.rule == "key_unique_in_cleaned_section")
    assert dup == [(0, "YQ=="), (2, "YQ==")]
    crc = next(f for f in report.failures if f.rule == "batches_crc_valid")
    assert "CRC mismatch" in crc.detail and "at byte" in crc.detail
    assert all(report.failed[r] == 0 for r in report.checked if r not in set(expected.values()))
    assert (docs / "index.html").exists() and list((docs / "validations").rglob("*.html"))
    # The front page is our own and opens offline: no script, nothing fetched from elsewhere.
    front = (docs / "index.html").read_text()
    assert "<script" not in front and "://" not in front and "indexes_consistent" in front
    assert (docs / "great-expectations.html").exists() and 'href="validations/' in front
    assert report.to_dataframe(spark).count() == len(report.checked) == 12


def test_the_good_twins_and_a_cleaned_output_pass(spark, sample_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    good(tmp_path / "log", "good-0")
    assert validate(spark, str(tmp_path / "log")).success
    out = tmp_path / "cleaned"
    config = JobConfig.build({"cleanup.policy": "compact", "retention.ms": -1})
    clean(spark, str(sample_dir), str(out), config, now_ms=FIXED_NOW_MS, log=lambda line: None)
    report = validate(spark, str(out))
    assert report.success, report.lines()
    assert report.checked["key_unique_in_cleaned_section"] > 1000


def rebuilt(out: Path, dst: Path, change: Callable[[list[dict]], list[dict]]) -> Path:  # type: ignore[type-arg]
    """A copy of the cleaned output whose partition t-0 holds `change(records)`, one batch each."""
    shutil.copytree(out, dst)
    rewrite_partition(dst, "t-0", change(read_log(out, "t-0")))
    return dst


def test_the_promise_holds_for_a_clean_and_catches_each_breach(spark, tmp_path: Path, engine: str) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    versions = [keyed(0, b"a", b"b", b"c"), keyed(3, b"a", b"b"), keyed(5, b"a", b"d")]
    write_log(src, "t-0", [versions, [keyed(7, b"e")]])
    out = tmp_path / "out"
    config = JobConfig.build({"cleanup.policy": "compact", "retention.ms": -1})
    clean(spark, str(src), str(out), config, now_ms=FIXED_NOW_MS, log=lambda line: None)
    assert validate(spark, str(out), against=str(src)).success

    def removed(rows: list[dict]) -> list[dict]:  # type: ignore[type-arg]
        return [r for r in rows if r["offset"] != 6]  # d's only value

    def put_back(rows: list[dict]) -> list[dict]:  # type: ignore[type-arg]
        old = next(r for r in read_log(src, "t-0") if r["offset"] == 1)  # b, superseded at 4
        return [*rows, old]

    def changed(rows: list[dict]) -> list[dict]:  # type: ignore[type-arg]
        return [{**r, "value": b"changed"} if r["offset"] == 2 else r for r in rows]

    for name, change, rule, rows in [
        ("removed", removed, "latest_value_kept", 1),
        ("put-back", put_back, "key_unique_in_cleaned_section", 2),  # both records of the key
        ("changed", changed, "record_from_source", 1),
    ]:
        broken = rebuilt(out, tmp_path / name, change)
        report = validate(spark, str(broken), against=str(src))
        assert not report.success and report.failed[rule] == rows, (name, report.failed)
        if name == "put-back":  # below the cleaner checkpoint, the source's later b supersedes it
            assert [(f.rule, f.offset) for f in report.failures if f.rule == "superseded_record_gone"] == [
                ("superseded_record_gone", 1)
            ]
        if name != "changed":  # a record fewer or more: the run report's counts no longer add up
            assert report.failed["counts_match"] == 1
        else:
            assert report.failed["counts_match"] == 0 and report.failed["latest_value_kept"] == 0


def test_the_promise_follows_aborts_and_tombstones(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """An aborted record is not a key's latest value (the one before it is); a tombstone the first
    pass only stamps with a horizon had to stay."""
    src = tmp_path / "src"
    txn = {"attributes": TRANSACTIONAL_MASK, "producer_id": 7, "producer_epoch": 0}
    aborted = v2_batch(2, [(0, T, b"a", b"never", [])], base_sequence=0, **txn)
    abort = v2_batch(
        3,
        [(0, T, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", [])],
        attributes=TRANSACTIONAL_MASK | CONTROL_MASK,
        producer_id=7,
        producer_epoch=0,
    )
    tombstone = v2_batch(4, [(0, T, b"b", None, [])])
    write_log(src, "t-0", [[keyed(0, b"a", b"b"), aborted, abort, tombstone], [keyed(5, b"z")]])
    out = tmp_path / "out"
    config = JobConfig.build({"cleanup.policy": "compact", "retention.ms": -1})
    clean(spark, str(src), str(out), config, now_ms=FIXED_NOW_MS, log=lambda line: None)
    assert [r["offset"] for r in read_log(out, "t-0")] == [0, 3, 4, 5]  # a@0, the marker, b's tombstone
    assert validate(spark, str(out), against=str(src)).success
    for offset in (0, 4):  # a's committed value, b's unexpired tombstone
        broken = rebuilt(
            out, tmp_path / f"without-{offset}", lambda rows, o=offset: [r for r in rows if r["offset"] != o]
        )
        report = validate(spark, str(broken), against=str(src))
        assert report.failed["latest_value_kept"] == 1, (offset, report.failed)
        assert [(f.rule, f.offset) for f in report.failures if f.rule == "latest_value_kept"] == [
            ("latest_value_kept", offset)
        ]
