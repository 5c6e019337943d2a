"""One scenario per cleaner and retention rule (docs/cleaning-rules.md), with exact surviving offsets and bytes.

Every partition below is one scenario (its topic name selects its config); they run through
one `clean` pass together, and the delete-horizon scenarios through further passes.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

import pipelines
from pipelines.config import JobConfig
from segment_io.checkpoints import parse_leader_epoch_checkpoint, parse_offset_checkpoint
from segment_io.format.batch import parse_v2_header
from segment_io.format.constants import CONTROL_MASK, TRANSACTIONAL_MASK, Codec
from segment_io.index import read_txn_index
from segment_io.layout import META_DIR
from segment_io.producer_snapshot import write_snapshot
from tests.helpers import read_batches, read_log, v2_batch, write_log

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000
NOW = T0 + 5_000
HOUR = 3_600_000


def batch(
    base: int, recs: list[tuple[int, bytes | None, bytes | None]], ts: int | None = None, **kw
) -> bytes:  # type: ignore[no-untyped-def]
    return v2_batch(base, [(o - base, (T0 + o if ts is None else ts), k, v, []) for o, k, v in recs], **kw)


def marker(offset: int, pid: int, control_type: int, epoch: int = 0) -> bytes:
    return v2_batch(
        offset,
        [(0, T0 + offset, struct.pack(">hh", 0, control_type), struct.pack(">hi", 0, 3), [])],
        attributes=TRANSACTIONAL_MASK | CONTROL_MASK,
        producer_id=pid,
        producer_epoch=epoch,
    )


def txn(base: int, recs: list[tuple[int, bytes | None, bytes | None]], pid: int) -> bytes:
    return batch(
        base, recs, attributes=TRANSACTIONAL_MASK, producer_id=pid, producer_epoch=0, base_sequence=base
    )


def legacy(entries: list[tuple[int, bytes | None, bytes | None]], codec: Codec) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=int(codec), batch_size=1 << 20)
    for o, k, v in entries:
        builder.append(o - entries[0][0] if codec != Codec.NONE else o, timestamp=T0 + o, key=k, value=v)
    data = bytearray(builder.build())
    if codec != Codec.NONE:
        data[0:8] = entries[-1][0].to_bytes(8, "big")
    return bytes(data)


A = {  # superseded records; merged groups; untouched batches copied verbatim
    "B0": batch(0, [(0, b"k1", b"a"), (1, b"k2", b"b")]),
    "B1": batch(2, [(2, b"k1", b"c")]),
    "B2": batch(3, [(3, b"k3", b"d"), (4, b"k2", b"e")]),
    "B3": batch(5, [(5, b"k1", b"f")]),
}
D_BATCHES = [
    txn(0, [(0, b"k1", b"a"), (1, b"k2", b"b")], pid=9),
    marker(2, 9, 0),  # ABORT
    batch(3, [(3, b"k1", b"c")]),
    txn(4, [(4, b"k3", b"d")], pid=9),
    marker(5, 9, 1),  # COMMIT
    batch(6, [(6, b"k4", b"e")]),
]
E_FIRST = batch(0, [(0, b"k1", b"a")], producer_id=5, producer_epoch=2, base_sequence=17)
SIZE_SEGMENTS = [[batch(i, [(i, b"k%d" % i, b"v" * 50)])] for i in range(4)]
SEGMENT_SIZE = len(SIZE_SEGMENTS[0][0])

CONFIG = {
    "defaults": {"retention.ms": -1},
    "topics": {
        "sup": {"cleanup.policy": "compact"},
        "nullkey": {"cleanup.policy": "compact"},
        "tomb": {
            "cleanup.policy": "compact",
            "segpipe.last.segment.sealed": True,
            "delete.retention.ms": 1000,
        },
        "txn": {
            "cleanup.policy": "compact",
            "segpipe.last.segment.sealed": True,
            "delete.retention.ms": 1000,
            "producer.id.expiration.ms": 1,
        },
        "producer": {"cleanup.policy": "compact", "segpipe.last.segment.sealed": True},
        "ret": {"cleanup.policy": "delete", "retention.ms": 1000},
        "retall": {"cleanup.policy": "delete", "retention.ms": 1000},
        "size": {"cleanup.policy": "delete", "retention.bytes": 2 * SEGMENT_SIZE + 1},
        "lso": {"cleanup.policy": "compact"},
        "legacy": {"cleanup.policy": "compact", "segpipe.last.segment.sealed": True},
        "lag": {
            "cleanup.policy": "compact",
            "segpipe.last.segment.sealed": True,
            "min.compaction.lag.ms": 1000,
        },
        "open": {"cleanup.policy": "compact", "segpipe.last.segment.sealed": True},
        "whole": {
            "cleanup.policy": "compact",
            "segpipe.last.segment.sealed": True,
            "delete.retention.ms": 1000,
        },
    },
}
WHOLE = [  # every record survives: copied as it is unless it holds a tombstone (then stamped)
    batch(0, [(0, b"k1", b"a"), (1, b"k2", b"b")], codec=Codec.ZSTD),
    batch(2, [(2, b"k3", None), (3, b"k4", b"c")], codec=Codec.LZ4),
    batch(4, [(4, b"k5", b"d"), (5, b"k6", b"e")], codec=Codec.SNAPPY),
    batch(6, [(6, b"k5", b"f")], codec=Codec.SNAPPY),
]


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("rules") / "src"
    write_log(root, "sup-0", [[A["B0"], A["B1"]], [A["B2"]], [A["B3"]]])
    write_log(
        root, "nullkey-0", [[batch(0, [(0, None, b"x"), (1, b"k1", b"y")])], [batch(2, [(2, b"k2", b"z")])]]
    )
    write_log(
        root,
        "tomb-0",
        [[batch(0, [(0, b"k1", b"a")]), batch(1, [(1, b"k1", None)]), batch(2, [(2, b"k2", b"b")])]],
    )
    write_log(root, "txn-0", [D_BATCHES])
    write_log(root, "producer-0", [[E_FIRST, batch(1, [(1, b"k1", b"b")])]], mtime_ms=NOW)
    write_log(
        root,
        "ret-0",
        [
            [batch(0, [(0, b"a", b"1")])],
            [batch(1, [(1, b"b", b"2")])],
            [batch(2, [(2, b"c", b"3")], ts=T0 + 20_000)],
        ],
    )
    write_log(root, "retall-0", [[batch(0, [(0, b"a", b"1")])], [batch(1, [(1, b"b", b"2")])]])
    write_log(root, "size-0", SIZE_SEGMENTS)
    write_log(root, "lso-0", [[batch(i, [(i, b"k", b"%d" % i)])] for i in range(4)])
    write_log(
        root,
        "legacy-0",
        [
            [
                legacy([(0, b"k1", b"a")], Codec.NONE),
                legacy([(1, b"k1", b"b")], Codec.NONE),
                legacy([(2, b"k2", b"c"), (3, b"k3", None)], Codec.GZIP),
            ]
        ],
    )
    write_log(
        root,
        "lag-0",
        [[batch(0, [(0, b"k1", b"a"), (1, b"k1", b"b")])], [batch(2, [(2, b"k1", b"c")], ts=T0 + 4_800)]],
    )
    write_log(
        root,
        "open-0",
        [[batch(0, [(0, b"k1", b"a")])], [txn(1, [(1, b"k1", b"b")], pid=7)], [batch(2, [(2, b"k1", b"c")])]],
    )
    write_log(root, "whole-0", [WHOLE[:2], WHOLE[2:]])
    (root / "whole-0" / "00000000000000000004.snapshot").write_bytes(
        write_snapshot([])
    )  # its second segment's
    (root / "ret-0" / "leader-epoch-checkpoint").write_text("0\n3\n0 0\n1 1\n3 2\n")
    (root / "ret-0" / "00000000000000000001.snapshot").write_bytes(b"s1")
    (root / "ret-0" / "00000000000000000002.snapshot").write_bytes(b"s2")
    (root / "log-start-offset-checkpoint").write_text("0\n1\nlso 0 2\n")
    return root


@pytest.fixture(scope="module")
def out(spark, src: Path) -> Path:  # type: ignore[no-untyped-def]
    dst = src.parent / "out1"
    report = pipelines.clean(
        spark, str(src), str(dst), JobConfig.build(CONFIG["defaults"], CONFIG["topics"]), now_ms=NOW
    )
    assert {p.partition for p in report.partitions} == {d.name for d in src.iterdir() if d.is_dir()}
    return dst


def offsets(root: Path, part: str) -> list[int]:
    return [r["offset"] for r in read_log(root, part)]


def deleted_by(root: Path, part: str) -> dict[str, int]:
    """The run report's segments deleted per retention rule, for one partition."""
    report = json.loads((root / META_DIR / "report.json").read_text())
    row = next(p for p in report["partitions"] if p["partition"] == part)
    rules = ("log_start_offset", "retention_bytes", "retention_ms")
    return {rule: row[f"deleted_by_{rule}"] for rule in rules if row[f"deleted_by_{rule}"]}


def test_superseded_records_and_verbatim_copies(out: Path) -> None:
    batches = read_batches(out, "sup-0")
    assert [seg for seg, _ in batches] == [0, 0, 5]  # segments 0 and 3 merged into one group
    assert [b for _, b in batches] == [A["B1"], A["B2"], A["B3"]]  # byte for byte
    assert offsets(out, "sup-0") == [2, 3, 4, 5]
    report = json.loads((out / META_DIR / "report.json").read_text())
    sup = next(p for p in report["partitions"] if p["partition"] == "sup-0")
    assert (
        sup["removed_superseded"] == 2 and sup["cleaned_up_to"] == 5 and sup["batches_copied_verbatim"] == 2
    )


def test_batches_whose_records_all_survive(out: Path) -> None:
    """Kept whole (byte for byte) unless one holds a tombstone, which is stamped with a horizon;
    a batch that lost a record to a later one is rewritten."""
    batches = [b for _, b in read_batches(out, "whole-0")]
    assert batches[0] == WHOLE[0] and batches[3] == WHOLE[3]
    stamped = parse_v2_header(batches[1])
    assert stamped.has_delete_horizon and stamped.base_timestamp == NOW + 1000 and stamped.records_count == 2
    assert parse_v2_header(batches[2]).records_count == 1  # k5 at offset 6 supersedes offset 4
    assert offsets(out, "whole-0") == [0, 1, 2, 3, 5, 6]
    # Both segments are one group based at 0: the second's snapshot goes with it (as Kafka's cleaner
    # removes a replaced segment's), and the log end gets one (the source had none there).
    assert [p.name for p in (out / "whole-0").glob("*.log")] == ["00000000000000000000.log"]
    assert sorted(p.name for p in (out / "whole-0").glob("*.snapshot")) == ["00000000000000000007.snapshot"]


def test_null_key_records_are_dropped_and_batch_rewritten(out: Path) -> None:
    (_, first), _ = read_batches(out, "nullkey-0")
    h = parse_v2_header(first)
    assert (h.base_offset, h.last_offset_delta, h.records_count, h.base_timestamp) == (0, 1, 1, T0 + 1)
    assert offsets(out, "nullkey-0") == [1, 2]


def test_tombstone_gets_a_horizon_then_goes_after_it(spark, out: Path) -> None:  # type: ignore[no-untyped-def]
    rows = read_log(out, "tomb-0")
    assert [(r["offset"], r["value"]) for r in rows] == [(1, None), (2, b"b")]
    assert rows[0]["delete_horizon_ms"] == NOW + 1000 and rows[0]["timestamp"] == T0 + 1
    h = parse_v2_header(read_batches(out, "tomb-0")[0][1])
    assert h.has_delete_horizon and h.base_timestamp == NOW + 1000
    cfg = JobConfig.build(None, {"tomb": CONFIG["topics"]["tomb"]})
    second = out.parent / "tomb2"
    pipelines.clean(spark, str(out / "tomb-0"), str(second), cfg, now_ms=NOW + 999)
    assert read_batches(second, "tomb-0") == read_batches(out, "tomb-0")  # before the horizon: untouched
    third = out.parent / "tomb3"
    pipelines.clean(spark, str(second), str(third), cfg, now_ms=NOW + 1000)
    assert offsets(third, "tomb-0") == [2]
    cps = parse_offset_checkpoint((out / "cleaner-offset-checkpoint").read_bytes(), "x")
    assert {tp.topic: o for tp, o in cps.items()}["tomb"] == 3


def test_transactions_aborted_data_markers_and_txnindex(spark, out: Path) -> None:  # type: ignore[no-untyped-def]
    rows = read_log(out, "txn-0")
    assert [r["offset"] for r in rows] == [2, 3, 4, 5, 6]
    assert [r["is_control"] for r in rows] == [True, False, False, True, False]
    [entry] = read_txn_index((out / "txn-0" / "00000000000000000000.txnindex").read_bytes())
    assert (entry.producer_id, entry.first_offset, entry.last_offset) == (9, 0, 2)
    cfg = JobConfig.build(None, {"txn": CONFIG["topics"]["txn"]})
    second, third = out.parent / "txn2", out.parent / "txn3"
    pipelines.clean(spark, str(out / "txn-0"), str(second), cfg, now_ms=NOW + 10)
    rows2 = read_log(second, "txn-0")
    assert [r["offset"] for r in rows2] == [2, 3, 4, 5, 6]
    assert rows2[0]["delete_horizon_ms"] == NOW + 10 + 1000  # ABORT marker now discardable: stamped
    assert rows2[3]["delete_horizon_ms"] is None  # COMMIT: its data (offset 4) remains
    assert not (second / "txn-0" / "00000000000000000000.txnindex").exists()
    pipelines.clean(spark, str(second), str(third), cfg, now_ms=NOW + 10 + 1000)
    assert offsets(third, "txn-0") == [3, 4, 5, 6]


def test_last_batch_of_an_active_producer_is_kept_empty(out: Path) -> None:
    first = read_batches(out, "producer-0")[0][1]
    original = parse_v2_header(E_FIRST)
    expected_empty = struct.pack(">qiib", 0, 49, 0, 2)  # base offset, length 49, leader epoch, magic
    assert first[:17] == expected_empty
    h = parse_v2_header(first)
    assert (h.records_count, h.codec, h.base_timestamp, h.max_timestamp) == (
        0,
        Codec.NONE,
        -1,
        original.max_timestamp,
    )
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_offset_delta) == (5, 2, 17, 0)
    assert not h.has_delete_horizon
    assert offsets(out, "producer-0") == [1]


def test_time_retention_deletes_old_prefix_and_maintains_partition_files(out: Path) -> None:
    assert [seg for seg, _ in read_batches(out, "ret-0")] == [2]
    # The snapshot of the deleted segment goes; the kept one stays, and the log end gets one.
    assert sorted(p.name for p in (out / "ret-0").glob("*.snapshot")) == [
        "00000000000000000002.snapshot",
        "00000000000000000003.snapshot",
    ]
    epochs = parse_leader_epoch_checkpoint((out / "ret-0" / "leader-epoch-checkpoint").read_bytes(), "x")
    # (0,0), (1,1) and (3,2) all start at or below the new log start 2: the last one is re-added at 2.
    assert epochs == [(3, 2)]
    assert deleted_by(out, "ret-0") == {"retention_ms": 2}


def test_everything_expired_leaves_an_empty_segment_at_the_log_end(out: Path) -> None:
    assert sorted(p.name for p in (out / "retall-0").glob("*.log")) == ["00000000000000000002.log"]
    assert (out / "retall-0" / "00000000000000000002.log").stat().st_size == 0


def test_size_retention_stops_before_going_below_the_limit(out: Path) -> None:
    assert [seg for seg, _ in read_batches(out, "size-0")] == [1, 2, 3]
    assert deleted_by(out, "size-0") == {"retention_bytes": 1}


def test_log_start_offset_rule_applies_to_compact_only_topics(out: Path) -> None:
    assert [seg for seg, _ in read_batches(out, "lso-0")] == [2, 3]
    starts = parse_offset_checkpoint((out / "log-start-offset-checkpoint").read_bytes(), "x")
    assert all(tp.topic != "lso" for tp in starts)  # log start = first segment base: not written
    assert deleted_by(out, "lso-0") == {"log_start_offset": 2}


def test_legacy_batches_are_converted_to_v2(out: Path) -> None:
    rows = read_log(out, "legacy-0")
    assert [(r["offset"], r["key"], r["value"], r["magic"]) for r in rows] == [
        (1, b"k1", b"b", 2),
        (2, b"k2", b"c", 2),
        (3, b"k3", None, 2),
    ]
    assert [r["codec"] for r in rows] == ["none", "gzip", "gzip"]
    assert rows[2]["delete_horizon_ms"] is not None  # a kept tombstone stamps the converted batch


def test_min_compaction_lag_keeps_recent_segments_dirty(out: Path) -> None:
    assert offsets(out, "lag-0") == [1, 2]


def test_open_transaction_bounds_the_cleanable_range(out: Path) -> None:
    assert offsets(out, "open-0") == [0, 1, 2]
    cps = parse_offset_checkpoint((out / "cleaner-offset-checkpoint").read_bytes(), "x")
    assert {tp.topic: o for tp, o in cps.items()}["open"] == 1


def test_source_is_untouched_and_output_validates(src: Path, out: Path) -> None:
    from segment_io.partition import inspect_log_dir
    from segment_io.storage import open_storage

    storage, path = open_storage(str(out))
    _, reports = inspect_log_dir(storage, path)
    assert all(r.ok for r in reports), [r.errors for r in reports]
    assert read_batches(src, "sup-0")[0][1] == A["B0"]


def test_a_topic_selection_keeps_only_its_topics(spark, sample_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from pipelines.config.selection import TopicSelection
    from pipelines.errors import ConfigError
    from pipelines.log.source import open_source

    with pytest.raises(ConfigError, match="ordrs matches no topic of SRC"):
        open_source(str(sample_dir), patterns=("ordrs",), named="SRC")
    assert open_source(str(sample_dir), patterns=("ord*",)).topics == ["orders"]
    dst = tmp_path / "selected"
    report = pipelines.clean(
        spark,
        str(sample_dir),
        str(dst),
        JobConfig(),
        now_ms=1_700_700_000_000,
        topics=TopicSelection(("ord*",)),
    )
    assert sorted(p.partition for p in report.partitions) == ["orders-0", "orders-1"]
    assert sorted(p.name for p in dst.iterdir() if p.is_dir() and p.name != META_DIR) == [
        "orders-0",
        "orders-1",
    ]
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint"):
        if (dst / name).exists():
            entries = parse_offset_checkpoint((dst / name).read_bytes(), name)
            assert {tp.topic for tp in entries} <= {"orders"}
