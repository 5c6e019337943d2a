"""`segpipe erase` as operators run it: every record of the listed keys gone from every partition
and codec, with transactions and idempotent producers; everything else byte for byte; evidence
without the keys; an independent proof that fails on a record put back or one too many removed;
refusals and kills that lose nothing."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import signal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords

from pipelines.config.tuning import DRIVER_WORK, KEY_BROADCAST
from segment_io.exit_codes import ExitCode
from segment_io.generate import generate_log_dir
from segment_io.generate_spec import TopicSpec
from segment_io.layout import META_DIR
from segment_io.storage import open_storage
from tests.helpers import NO_JVM, files_of, lock_held, read_log, run_segpipe, spark_jobs_of

pytestmark = pytest.mark.e2e

SPECS = [
    TopicSpec(
        "orders",
        partitions=2,
        records=2500,
        keys=150,
        header_ratio=0.3,
        records_per_batch=(1, 12),
        segment_bytes=32 * 1024,
    ),
    TopicSpec(
        "events",
        records=1500,
        keys=400,
        null_key_ratio=0.1,
        log_append_time=True,
        transactional_ratio=0.0,
        codecs=("lz4", "none"),
        segment_bytes=24 * 1024,
    ),
    # Keys that rarely repeat: an erase touches few of its segments.
    TopicSpec(
        "quiet",
        records=1500,
        keys=100_000,
        key_skew=0.0,
        codecs=("zstd", "gzip", "snappy"),
        segment_bytes=24 * 1024,
    ),
]
KEYS = [b"k0000000001", b"k0000000002", b"k0000000007", b"k0000000120"]
ABSENT = b"nobody-has-this-key"
HEADER = "trace-id"
PARTITIONS = ["orders-0", "orders-1", "events-0", "quiet-0"]
JOINED = {KEY_BROADCAST.env: "0"}  # every key list is joined with the records' keys
WHOLE = {KEY_BROADCAST.env: str(2**30)}  # every key list here is read whole


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("erase") / "src"
    storage, path = open_storage(str(root))
    generate_log_dir(storage, path, SPECS, seed=11)
    return root


def once(src: Path) -> list[bytes]:
    """Keys of `quiet` that only one record in the whole source carries, in offset order."""
    counts: dict[bytes, int] = {}

    def keyed(part: str) -> list[bytes]:
        return [r["key"] for r in read_log(src, part) if r["key"] is not None and not r["is_control"]]

    for part in PARTITIONS:
        for key in keyed(part):
            counts[key] = counts.get(key, 0) + 1
    return [key for key in keyed("quiet-0") if counts[key] == 1]


@pytest.fixture(scope="module")
def keys(src: Path) -> list[bytes]:
    """The listed keys: frequent ones, one found nowhere, one of `quiet`'s first records (its other
    segments are untouched), and a trace-id value a record carries whose key is not listed (it
    goes by its header only)."""
    quiet = once(src)[0]
    header_value = next(
        h["value"]
        for r in read_log(src, "orders-1")
        for h in r["headers"]
        if h["key"] == HEADER and h["value"] and r["key"] not in KEYS
    )
    return [*KEYS, ABSENT, quiet, header_value]


def key_file(path: Path, keys: list[bytes]) -> Path:
    path.write_text("".join(k.hex() + "\n" for k in keys))
    return path


SECRET = b"the operator's erasure secret, kept apart"


def secret_file(directory: Path) -> Path:
    path = directory / "erasure.secret"
    path.write_bytes(SECRET + b"\n")
    return path


def erase(src: Path, out: Path, keys: Path, *flags: str, env: dict[str, str] | None = None) -> Any:
    """The erase of `keys` (hex), with the header and the operator's secret (beside the key list)."""
    return run_segpipe(
        "erase",
        str(src),
        str(out),
        "--keys",
        str(keys),
        "--key-format",
        "hex",
        "--also-in-headers",
        HEADER,
        "--secret-file",
        str(secret_file(keys.parent)),
        *flags,
        env=env,
    )


@pytest.fixture(scope="module")
def erased(src: Path, keys: list[bytes], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    work = tmp_path_factory.mktemp("erased")
    listing = key_file(work / "keys.hex", keys)
    proc = erase(src, work / "out", listing, "--report", str(work / "report.json"), "--validate")
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert "segpipe: erasure proved" in proc.stdout
    return work / "out", work


def gone(record: dict[str, Any], keys: list[bytes]) -> bool:
    if record["is_control"]:
        return False
    return record["key"] in keys or any(h["key"] == HEADER and h["value"] in keys for h in record["headers"])


def view(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    fields = ("offset", "timestamp", "key", "value", "is_control", "producer_id", "producer_epoch", "codec")
    return [(*(r[f] for f in fields), tuple((h["key"], h["value"]) for h in r["headers"])) for r in rows]


@pytest.mark.parametrize("part", PARTITIONS)
def test_output_is_source_minus_exactly_the_listed_records(
    src: Path, erased: tuple[Path, Path], keys: list[bytes], part: str
) -> None:
    out, _ = erased
    before = read_log(src, part)
    expected = [r for r in before if not gone(r, keys)]
    assert len(expected) < len(before)
    assert view(read_log(out, part)) == view(expected)


def test_kafka_python_reads_every_output_batch(erased: tuple[Path, Path]) -> None:
    out, _ = erased
    for log in out.glob("*/*.log"):
        records = MemoryRecords(log.read_bytes())
        theirs = []
        while records.has_next():
            batch = records.next_batch()
            assert isinstance(batch, DefaultRecordBatch) and batch.validate_crc()
            theirs += [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch]
        ours = [
            (
                r["offset"],
                r["timestamp"],
                r["key"],
                r["value"],
                tuple((h["key"], h["value"]) for h in r["headers"]),
            )
            for r in read_log(out, log.parent.name)
            if r["segment_base_offset"] == int(log.stem)
        ]
        assert theirs == ours


def test_untouched_segments_are_copied_byte_for_byte_and_the_log_end_is_kept(
    src: Path, erased: tuple[Path, Path], keys: list[bytes]
) -> None:
    out, _ = erased
    source, output = files_of(src), files_of(out)
    # The same segments, indexes, snapshots and checkpoints, and the snapshots a broker would have
    # written, which the source lacked (test_an_archive_without_snapshots_gets_its_producers).
    written = {n for n in output.keys() - source.keys() if n.endswith(".snapshot")}
    assert written and output.keys() == source.keys() | written
    untouched = 0
    for part in PARTITIONS:
        rows = read_log(src, part)
        for base in {r["segment_base_offset"] for r in rows}:
            name = f"{part}/{base:020d}.log"
            touched = any(gone(r, keys) for r in rows if r["segment_base_offset"] == base)
            assert (source[name] == output[name]) is not touched, name
            untouched += not touched
            if not touched:
                for suffix in (".index", ".timeindex"):
                    assert source[name.replace(".log", suffix)] == output[name.replace(".log", suffix)]
        # The batch that ends the log stays, an empty header if the erase took all its records.
        assert max(_batch_ends(out, part)) == max(_batch_ends(src, part))
    assert untouched > 0


def test_producers_last_batches_survive_as_empty_headers(src: Path, erased: tuple[Path, Path]) -> None:
    """Per producer, the last data batch's offsets are still in the output (an empty header where
    the erase took all of its records): the broker rebuilds its sequence and epoch from it."""
    out, _ = erased
    for part in PARTITIONS:
        last_of: dict[int, int] = {}
        for r in read_log(src, part):
            if r["producer_id"] >= 0 and not r["is_control"]:
                last_of[r["producer_id"]] = max(last_of.get(r["producer_id"], -1), r["batch_last_offset"])
        kept = _batch_ends(out, part)
        assert all(last in kept for last in last_of.values()), part


def _batch_ends(root: Path, part: str) -> set[int]:
    from segment_io.layout import list_partition
    from segment_io.segment.reader import SegmentReader
    from segment_io.topic_partition import TopicPartition

    storage, path = open_storage(str(root / part))
    topic, _, n = part.rpartition("-")
    ends: set[int] = set()
    for seg in list_partition(storage, path, TopicPartition(topic, int(n))).segments:
        ends |= set(SegmentReader(storage, seg.log.path, seg.base_offset).scan().table.last_offset.tolist())
    return ends


def attributed(record: dict[str, Any], keys: list[bytes]) -> bytes | None:
    """The listed key a removed record is counted under: its own, else its first listed header value."""
    if record["is_control"]:
        return None
    if record["key"] in keys:
        return record["key"]
    return next((h["value"] for h in record["headers"] if h["key"] == HEADER and h["value"] in keys), None)


def keyed(key: bytes, secret: bytes = SECRET) -> str:
    return hmac.new(secret, key, hashlib.sha256).hexdigest()


def test_the_evidence_names_keys_by_digest_only(
    src: Path, erased: tuple[Path, Path], keys: list[bytes]
) -> None:
    out, work = erased
    report = json.loads((work / "report.json").read_text())
    assert report["erased"] == json.loads((out / META_DIR / "report.json").read_text())["erased"]
    digest = {keyed(k): k for k in keys}
    assert report["key_digest"] == "hmac-sha256" and report["keys_listed"] == len(digest)
    assert report["secret"] not in ("", None) and SECRET.decode() not in json.dumps(report)
    assert report["not_found"] == [keyed(ABSENT)]
    assert {digest[item["digest"]] for item in report["erased"]} == set(keys) - {ABSENT}
    for item in report["erased"]:
        key = digest[item["digest"]]
        for where in item["partitions"]:
            offsets = [r["offset"] for r in read_log(src, where["partition"]) if attributed(r, keys) == key]
            assert (where["records"], where["first_offset"], where["last_offset"]) == (
                len(offsets),
                min(offsets),
                max(offsets),
            )
        assert item["records"] == sum(p["records"] for p in item["partitions"])
    for p in report["partitions"]:
        expected = sum(1 for r in read_log(src, p["partition"]) if gone(r, keys))
        assert p["records_erased"] == expected and p["records_out"] == p["records_in"] - expected
    assert sum(p["batches_dropped"] + p["batches_emptied"] for p in report["partitions"]) > 0
    # No listed key's bytes anywhere in the evidence.
    for text in (
        (work / "report.json").read_bytes(),
        *(p.read_bytes() for p in (out / META_DIR).iterdir()),
    ):
        assert not any(k in text or k.hex().encode() in text for k in keys)


def test_without_the_secret_candidate_keys_match_nothing(
    src: Path, erased: tuple[Path, Path], keys: list[bytes], tmp_path: Path
) -> None:
    """Given candidate keys (the listed ones among a thousand others), no unkeyed or wrongly keyed
    digest of any candidate is in the evidence; only the secret's holder matches them."""
    _, work = erased
    report = (work / "report.json").read_text()
    candidates = sorted({*keys, *(b"k%010d" % i for i in range(1000))})
    for guess in (
        [hashlib.sha256(k).hexdigest() for k in candidates],
        [hashlib.md5(k).hexdigest() for k in candidates],
        [keyed(k, b"a guessed secret, not the one") for k in candidates],
    ):
        assert not any(g in report for g in guess)
    assert sum(keyed(k) in report for k in candidates) == len(keys)
    # validate --erased with the secret checks the evidence names exactly the listed keys.
    proof = ("--key-format", "hex", "--also-in-headers", HEADER, "--against", str(src))
    out = work / "out"
    ok = run_segpipe(
        "validate",
        str(out),
        "--erased",
        str(work / "keys.hex"),
        *proof,
        "--secret-file",
        str(secret_file(work)),
    )
    assert ok.returncode == ExitCode.OK and "evidence checked" in ok.stdout, ok.stdout + ok.stderr
    other = tmp_path / "other.secret"
    other.write_bytes(b"another secret of enough bytes")
    wrong = run_segpipe(
        "validate", str(out), "--erased", str(work / "keys.hex"), *proof, "--secret-file", str(other)
    )
    assert wrong.returncode == ExitCode.INVALID and "keyed with another secret" in wrong.stdout, wrong.stdout
    short = tmp_path / "short.secret"
    short.write_bytes(b"tiny\n")
    refused = erase(src, tmp_path / "o", work / "keys.hex", "--secret-file", str(short))
    assert refused.returncode == ExitCode.REFUSED and "needs at least 16" in refused.stderr, refused.stderr
    unkeyed = run_segpipe(
        "erase",
        str(src),
        str(tmp_path / "o"),
        "--keys",
        str(work / "keys.hex"),
        "--key-format",
        "hex",
        "--dry-run",
    )
    assert unkeyed.returncode == ExitCode.OK and "kept nowhere" in unkeyed.stdout + unkeyed.stderr


def test_the_proof_passes_and_fails_where_it_must(
    src: Path, erased: tuple[Path, Path], keys: list[bytes], tmp_path: Path
) -> None:
    out, work = erased
    listing = work / "keys.hex"
    ok = run_segpipe(
        "validate",
        str(out),
        "--erased",
        str(listing),
        "--key-format",
        "hex",
        "--also-in-headers",
        HEADER,
        "--against",
        str(src),
    )
    assert ok.returncode == ExitCode.OK, ok.stdout + ok.stderr
    # A topic filter judges that topic's partitions; the others are named as left out by it.
    only = run_segpipe(
        "validate",
        str(out),
        "--erased",
        str(listing),
        "--key-format",
        "hex",
        "--also-in-headers",
        HEADER,
        "--against",
        str(src),
        "--topic",
        "orders",
    )
    assert only.returncode == ExitCode.INVALID, only.stdout + only.stderr
    assert "events-0: the partition is in SRC, but --topic leaves its topic out" in only.stdout, only.stdout
    assert "not in SRC" not in only.stdout and "(2 problems)" in only.stdout, only.stdout  # events-0, quiet-0
    plain = run_segpipe("validate", str(out))
    assert plain.returncode == ExitCode.OK and "is the output of an erase" in plain.stdout, plain.stdout
    # One erased record put back: an erase that left out a key only one record carries.
    single = once(src)[0]
    assert single in keys
    put_back = tmp_path / "put-back"
    assert (
        erase(src, put_back, key_file(tmp_path / "less.hex", [k for k in keys if k != single])).returncode
        == ExitCode.OK
    )
    failed = run_segpipe(
        "validate",
        str(put_back),
        "--erased",
        str(listing),
        "--key-format",
        "hex",
        "--also-in-headers",
        HEADER,
        "--against",
        str(src),
    )
    assert failed.returncode == ExitCode.INVALID and "1 records still carry a listed key" in failed.stdout, (
        failed.stdout
    )
    # One record too many removed: an erase of one more key, which only one record carries.
    more = [*keys, once(src)[1]]
    too_many = tmp_path / "too-many"
    assert erase(src, too_many, key_file(tmp_path / "more.hex", more)).returncode == ExitCode.OK
    failed = run_segpipe(
        "validate",
        str(too_many),
        "--erased",
        str(listing),
        "--key-format",
        "hex",
        "--also-in-headers",
        HEADER,
        "--against",
        str(src),
    )
    assert failed.returncode == ExitCode.INVALID and "is missing (not a listed key's)" in failed.stdout, (
        failed.stdout
    )


def erase_in_session(
    spark: Any,
    src: Path,
    out: Path,
    keys: Path,
    monkeypatch: pytest.MonkeyPatch,
    gate: Any = None,
    **options: Any,
) -> None:
    """What `erase` (with the header and the operator's secret) runs, as Spark tasks in this
    process's session (every stage its tasks; a command's own JVM would cost seconds): it shows it
    ran Spark jobs."""
    from pipelines.jobs.erase.job import run_erase
    from pipelines.jobs.erase.request import EraseRequest
    from pipelines.keys.key_digest import read_secret
    from segment_io.storage import Location

    monkeypatch.setenv(DRIVER_WORK.env, "off")
    before = spark_jobs_of(spark, "erase")
    request = EraseRequest(
        src=Location(str(src)),
        dst=Location(str(out)),
        keys=str(keys),
        key_format="hex",
        header_names=(HEADER,),
        digest=read_secret(str(secret_file(keys.parent))),
        **options,
    )
    run_erase(spark, request, print, gate)
    assert spark_jobs_of(spark, "erase") > before


def test_spark_tasks_write_the_same_bytes(
    spark, src: Path, erased: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    out, work = erased
    erase_in_session(spark, src, tmp_path / "out", work / "keys.hex", monkeypatch)
    assert files_of(tmp_path / "out") == files_of(out)


def test_dry_run_counts_and_writes_nothing(src: Path, erased: tuple[Path, Path], tmp_path: Path) -> None:
    _, work = erased
    proc = erase(src, tmp_path / "out", work / "keys.hex", "--dry-run", "--report", str(tmp_path / "r.json"))
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert not (tmp_path / "out").exists()
    dry = json.loads((tmp_path / "r.json").read_text())
    real = json.loads((work / "report.json").read_text())
    assert dry["dry_run"] and dry["erased"] == real["erased"] and dry["not_found"] == real["not_found"]
    assert "would erase" in proc.stdout


@pytest.mark.parametrize("joined", [False, True], ids=["broadcast", "joined"])
def test_a_million_keys_from_parquet(
    src: Path, erased: tuple[Path, Path], keys: list[bytes], tmp_path: Path, joined: bool
) -> None:
    """A million keys read whole and handed to every task, or joined with the records' keys."""
    out, _ = erased
    many = [f"absent-{i:07d}".encode() for i in range(1_000_000)] + keys
    pq.write_table(
        pa.table({"key": pa.array(many, pa.binary())}), tmp_path / "keys.parquet", row_group_size=100_000
    )
    proc = run_segpipe(
        "erase",
        str(src),
        str(tmp_path / "out"),
        "--keys",
        str(tmp_path / "keys.parquet"),
        "--also-in-headers",
        HEADER,
        env=JOINED if joined else WHOLE,
    )
    assert proc.returncode == ExitCode.OK, proc.stderr
    report = json.loads((tmp_path / "out" / META_DIR / "report.json").read_text())
    assert report["keys_listed"] == len(many) and report["not_found_count"] == 1_000_001
    assert len(by_digest(report, tmp_path / "out")[1]) == 1_000_001
    assert files_of(tmp_path / "out") == files_of(out)


def by_digest(report: dict[str, Any], root: Path | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """The evidence by digest; a joined list's digests of keys found nowhere are read from the
    files the report names (relative to the output `root`, or where a --report's copies are)."""
    not_found = report["not_found"]
    if not_found is None:
        files = [Path(name) if root is None else root / name for name in report["not_found_files"]]
        not_found = [line for f in files for line in f.read_text().splitlines()]
    assert len(not_found) == report["not_found_count"]
    return sorted(report["erased"], key=lambda item: item["digest"]), sorted(not_found)


@pytest.mark.parametrize("where", ["processes", "spark"])
def test_a_joined_key_list_erases_and_proves_as_one_read_whole(
    src: Path,
    erased: tuple[Path, Path],
    keys: list[bytes],
    tmp_path: Path,
    where: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A key list joined with the records' keys (SEGPIPE_KEY_BROADCAST_BYTES=0: every list is;
    a larger list than its limit is) over the driver's processes (the command line) or Spark (this
    process's session): the same bytes, the same evidence (keys in another order: by digest
    here), and a proof over the same join that passes on the output and fails on the source."""
    out, work = erased
    flow = {DRIVER_WORK.env: "processes"}
    report = tmp_path / "report.json"
    if where == "processes":
        proc = erase(
            src,
            tmp_path / "out",
            work / "keys.hex",
            "--master",
            "local[2]",
            "--validate",
            "--report",
            str(report),
            *NO_JVM,
            env={**JOINED, **flow},
        )
        assert proc.returncode == ExitCode.OK, proc.stderr
        said = proc.stdout
    else:
        from pipelines.jobs.erase.gate import erasure_gate
        from segment_io.storage import Location

        spark = request.getfixturevalue("spark")
        monkeypatch.setenv(KEY_BROADCAST.env, JOINED[KEY_BROADCAST.env])
        erase_in_session(
            spark,
            src,
            tmp_path / "out",
            work / "keys.hex",
            monkeypatch,
            validate=True,
            gate=erasure_gate(spark, str(src), (HEADER,)),
            report_path=Location(str(report)),
        )
        said = capsys.readouterr().out
    assert "segpipe: erasure proved" in said
    assert files_of(tmp_path / "out") == files_of(out)
    joined = json.loads(report.read_text())
    whole = json.loads((work / "report.json").read_text())
    assert joined["not_found"] is None and joined["not_found_files"]  # the digests are in files
    assert by_digest(joined) == by_digest(whole)
    in_output = json.loads((tmp_path / "out" / META_DIR / "report.json").read_text())
    assert by_digest(in_output, tmp_path / "out") == by_digest(whole)
    assert (joined["keys_listed"], joined["partitions"]) == (whole["keys_listed"], whole["partitions"])
    if where == "spark":
        return
    proof = (
        "--key-format",
        "hex",
        "--also-in-headers",
        HEADER,
        "--against",
        str(src),
        "--master",
        "local[2]",
    )
    unerased = run_segpipe(
        "validate", str(src), "--erased", str(work / "keys.hex"), *proof, *NO_JVM, env={**JOINED, **flow}
    )
    assert (
        unerased.returncode == ExitCode.INVALID and "records still carry a listed key" in unerased.stdout
    ), unerased.stdout


def test_refusals_write_nothing(src: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    proc = run_segpipe("erase", str(src), str(tmp_path / "out"), "--keys", str(empty))
    assert proc.returncode == ExitCode.REFUSED and "holds no key" in proc.stderr
    zero = tmp_path / "zero.txt"
    zero.write_bytes(b"")  # 0 bytes: the same refusal from every command that reads a list
    for args in (
        ("erase", str(src), str(tmp_path / "out"), "--keys", str(zero)),
        ("erase", str(src), str(tmp_path / "out"), "--keys", str(zero), "--dry-run"),
        ("validate", str(src), "--erased", str(zero), "--against", str(src)),
    ):
        proc = run_segpipe(*args)
        assert proc.returncode == ExitCode.REFUSED and "zero.txt: the list holds no key" in proc.stderr, (
            args,
            proc.stderr,
        )
    # A joined CSV list whose bad row only a task of the join reaches: the same typed refusal.
    bad = tmp_path / "bad.csv"
    bad.write_text("id,key\n" + "".join(f"{i},user-{i}\n" for i in range(200_000)) + "1,a,b\n")
    proc = run_segpipe("erase", str(src), str(tmp_path / "out"), "--keys", str(bad), env=JOINED)
    assert proc.returncode == ExitCode.REFUSED and "bad.csv: not a readable csv key list" in proc.stderr, (
        proc.stderr
    )
    assert "Traceback" not in proc.stderr
    lock = src / ".lock"
    lock.touch()
    try:
        with lock_held(lock):
            keys = key_file(tmp_path / "k.hex", KEYS)
            proc = run_segpipe(
                "erase", str(src), str(tmp_path / "out"), "--keys", str(keys), "--key-format", "hex"
            )
        assert proc.returncode == ExitCode.REFUSED and "a Kafka broker is running" in proc.stderr, proc.stderr
    finally:
        lock.unlink()
    assert not (tmp_path / "out").exists()


LEGACY = [
    TopicSpec(
        "old0",
        records=600,
        keys=12,
        legacy_magic=0,
        transactional_ratio=0.0,
        idempotent_ratio=0.0,
        header_ratio=0.0,
        null_key_ratio=0.05,
        codecs=("none", "gzip", "snappy"),
        segment_bytes=8 * 1024,
    ),
    TopicSpec(
        "old1",
        records=600,
        keys=12,
        legacy_magic=1,
        transactional_ratio=0.0,
        idempotent_ratio=0.0,
        header_ratio=0.0,
        codecs=("none", "gzip", "snappy", "lz4"),
        segment_bytes=8 * 1024,
    ),
]


def test_keys_are_erased_from_magic_0_and_1_message_sets(tmp_path: Path) -> None:
    """Legacy entries (single messages and compressed wrappers of both magics): an entry that carries
    no listed key is copied byte for byte; one that does becomes a v2 batch of its other records at
    their own offsets (as Kafka's cleaner converts a legacy entry it filters), in its codec; the log
    end offset stays; kafka-python reads every batch; the proof holds."""
    src = tmp_path / "src"
    storage, path = open_storage(str(src))
    generate_log_dir(storage, path, LEGACY, seed=5)
    parts = ["old0-0", "old1-0"]
    before = {p: read_log(src, p) for p in parts}
    counts: dict[bytes, int] = {}
    for rows in before.values():
        for r in rows:
            if r["key"] is not None:
                counts[r["key"]] = counts.get(r["key"], 0) + 1
    listed = sorted(counts, key=counts.__getitem__)[-3:]  # the most frequent: whole wrappers go too
    listed.append(before["old1-0"][-1]["key"])  # and the log's last record
    keys = key_file(tmp_path / "k.hex", listed)
    proc = erase(src, tmp_path / "out", keys, "--validate")
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    assert "segpipe: erasure proved" in proc.stdout
    for part in parts:
        after = read_log(tmp_path / "out", part)
        kept = [r for r in before[part] if r["key"] not in listed]
        assert len(kept) < len(before[part])
        fields = ("offset", "timestamp", "key", "value")
        assert [tuple(r[f] for f in fields) for r in after] == [tuple(r[f] for f in fields) for r in kept], (
            part
        )
    # The log end offset stays where the erased last record put it.
    end = run_segpipe("inspect", str(tmp_path / "out"), "--json")
    [old1] = [p for p in json.loads(end.stdout)["partitions"] if p["topic"] == "old1"]
    assert old1["segments"][-1]["last_offset"] == before["old1-0"][-1]["offset"]
    # Untouched legacy entries are byte for byte SRC's; filtered ones are v2 batches kafka-python reads.
    for log in (tmp_path / "out").glob("*/*.log"):
        records = MemoryRecords(log.read_bytes())
        while records.has_next():
            batch = records.next_batch()
            assert batch.validate_crc()
            for r in batch:
                assert r.key not in listed
    ok = run_segpipe(
        "validate", str(tmp_path / "out"), "--erased", str(keys), "--key-format", "hex", "--against", str(src)
    )
    assert ok.returncode == ExitCode.OK, ok.stdout + ok.stderr


@pytest.mark.parametrize("stage", ["after-scan", "mid-rewrite", "before-publish"])
def test_a_kill_loses_nothing(src: Path, erased: tuple[Path, Path], tmp_path: Path, stage: str) -> None:
    out, work = erased
    before = files_of(src)
    killed = run_segpipe(
        "erase",
        str(src),
        str(tmp_path / "out"),
        "--keys",
        str(work / "keys.hex"),
        "--key-format",
        "hex",
        "--also-in-headers",
        HEADER,
        fault=stage,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert files_of(src) == before and not (tmp_path / "out").exists()
    again = erase(src, tmp_path / "out", work / "keys.hex")
    assert again.returncode == ExitCode.OK, again.stderr
    assert files_of(tmp_path / "out") == files_of(out)


def test_the_readme_erase_example_runs(tmp_path: Path) -> None:
    """The README's erase commands, as written (their /tmp paths moved into the test's own)."""
    import re
    import shlex

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("### Erasing keys") :]
    [block] = re.findall(r"```sh\n(.*?)```", section[: section.index("\n### ")], re.DOTALL)
    for line in block.strip().splitlines():
        line = line.replace("/tmp/", f"{tmp_path}/")
        if line.startswith("printf"):
            text, target = re.fullmatch(r"printf '(.*)' > (\S+)", line).groups()  # type: ignore[union-attr]
            Path(target).write_text(text.replace("\\n", "\n"))
            continue
        words = shlex.split(line)
        assert words[0] == "segpipe"
        proc = run_segpipe(*words[1:])
        assert proc.returncode == ExitCode.OK, line + "\n" + proc.stdout + proc.stderr
        assert "erasure proved" in proc.stdout


def test_the_drivers_processes_write_the_same_bytes(
    src: Path, erased: tuple[Path, Path], tmp_path: Path
) -> None:
    """With a local master, an erase too large for the driver's threads runs in its own processes
    (made so here by SEGPIPE_DRIVER_WORK=processes); a JVM that cannot start shows no Spark ran."""
    out, work = erased
    before = files_of(src)
    processes = {DRIVER_WORK.env: "processes"}
    proc = erase(src, tmp_path / "out", work / "keys.hex", "--master", "local[2]", *NO_JVM, env=processes)
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert files_of(tmp_path / "out") == files_of(out)
    killed = run_segpipe(
        "erase",
        str(src),
        str(tmp_path / "killed"),
        "--keys",
        str(work / "keys.hex"),
        "--key-format",
        "hex",
        "--also-in-headers",
        HEADER,
        env=processes,
        fault="mid-rewrite",
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr  # a task's kill point took the whole run
    assert files_of(src) == before and not (tmp_path / "killed").exists()


def test_a_key_list_with_a_byte_order_mark_erases_its_first_key(src: Path, tmp_path: Path) -> None:
    """A list saved by a Windows editor: the mark is taken off, so its first key is erased too."""
    listing = tmp_path / "keys.txt"
    listing.write_bytes(b"\xef\xbb\xbf" + b"".join(k + b"\r\n" for k in KEYS))
    proc = run_segpipe("erase", str(src), str(tmp_path / "out"), "--keys", str(listing))
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert "starts with a UTF-8 byte-order mark; it was taken off" in proc.stdout
    held = {
        part: [r for r in read_log(src, part) if not r["is_control"] and r["key"] in KEYS]
        for part in PARTITIONS
    }
    assert any(r["key"] == KEYS[0] for rows in held.values() for r in rows)
    assert f"erased {sum(map(len, held.values())):,} records of 4 of the 4 listed keys" in proc.stdout
    for part in PARTITIONS:
        assert not [r for r in read_log(tmp_path / "out", part) if r["key"] in KEYS]


def test_keys_in_the_wrong_format_found_nowhere_are_warned_of(src: Path, tmp_path: Path) -> None:
    listing = tmp_path / "keys.txt"
    listing.write_bytes(b"".join(base64.b64encode(k) + b"\n" for k in KEYS))
    proc = run_segpipe("erase", str(src), str(tmp_path / "out"), "--keys", str(listing), "--dry-run")
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert "would erase 0 records of 0 of the 4 listed keys" in proc.stdout
    assert (
        "segpipe: warning: none of the 4 listed keys was found (read as --key-format utf8): all of them look "
        f"like base64 (e.g. {base64.b64encode(KEYS[0]).decode()!r}): did you mean --key-format base64?"
    ) in proc.stdout


def test_an_archive_without_snapshots_gets_its_producers(src: Path, erased: tuple[Path, Path]) -> None:
    """The source holds no producer snapshot: the output gets the ones a broker writes, at each
    segment it rolled to and at the log end (a broker then loads its producers rather than
    rebuilding them from the last segments), each naming every producer with its last batch
    before that offset, as kafka-python reads the source's batches."""
    from segment_io.producer_snapshot import read_snapshot

    out, _ = erased
    assert not list(src.glob("*/*.snapshot"))
    for part in PARTITIONS:
        last: dict[
            int, tuple[int, int, int]
        ] = {}  # producer -> epoch, last batch's max timestamp, last data offset
        states: dict[int, dict[int, tuple[int, int, int]]] = {}
        end = 0
        for log in sorted((src / part).glob("*.log")):
            if int(log.stem) > 0:
                states[int(log.stem)] = dict(last)  # a roll: the state before its first batch
            records = MemoryRecords(log.read_bytes())
            while records.has_next():
                b = records.next_batch()
                end = b.last_offset + 1
                if b.producer_id < 0:
                    continue
                data = last.get(b.producer_id, (0, 0, -1))[2] if b.is_control_batch else b.last_offset
                last[b.producer_id] = (b.producer_epoch, b.max_timestamp, data)
        states[end] = last
        assert len(states) > 1, part
        names = sorted(p.name for p in (out / part).glob("*.snapshot"))
        assert names == [f"{o:020d}.snapshot" for o in sorted(states)], part
        for offset, want in states.items():
            snapshot = out / part / f"{offset:020d}.snapshot"
            state = read_snapshot(snapshot.read_bytes(), str(snapshot))
            got = {pid: (e.epoch, e.timestamp, e.last_offset) for pid, e in state.items()}
            assert got == want, (part, offset)
