"""Small builders used by several tests (plain bytes, no project shortcuts)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from segment_io.exit_codes import ExitCode
from segment_io.format.batch import build_v2_batch
from segment_io.format.compression import compress
from segment_io.format.constants import Codec
from segment_io.format.record_columns import RecordColumns
from tests import command_server
from tests.command_server import kill_group

REPO = command_server.REPO
Record = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def v2_batch(
    base_offset: int,
    records: list[Record],
    *,
    codec: Codec = Codec.NONE,
    attributes: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    last_offset_delta: int | None = None,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
) -> bytes:
    """records: (offset delta, timestamp, key, value, headers); timestamps are absolute."""
    base_ts = records[0][1] if base_timestamp is None else base_timestamp
    cols = RecordColumns.from_records([(o, t - base_ts, k, v, h) for o, t, k, v, h in records])
    return build_v2_batch(
        base_offset=base_offset,
        records=compress(codec, cols.encode()),
        records_count=len(records),
        last_offset_delta=records[-1][0] if last_offset_delta is None else last_offset_delta,
        base_timestamp=base_ts,
        max_timestamp=max(r[1] for r in records) if max_timestamp is None else max_timestamp,
        attributes=attributes | int(codec),
        partition_leader_epoch=0,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


def write_segment(directory: Path, base_offset: int, data: bytes) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{base_offset:020d}.log"
    path.write_bytes(data)
    return path


def write_log(
    root: Path, partition_dir: str, segments: list[list[bytes]], mtime_ms: int | None = None
) -> None:
    """Write a partition of segments (each a list of complete batches) with Kafka's indexes.

    A segment is named after its first batch's base offset; an empty list continues the
    previous segment's offset (an empty segment at the next offset).
    """
    import numpy as np

    from segment_io.segment.scan import scan_buffer
    from segment_io.segment.writer import SegmentLimits, SegmentWriter
    from segment_io.storage import open_storage

    def header(b: bytes) -> tuple[int, int, int]:
        t = scan_buffer("batch", 0, np.frombuffer(b, dtype=np.uint8)).table
        last = int(t.last_offset[0])
        return (int(t.base_offset[0]) if t.base_offset[0] >= 0 else last), last, int(t.max_timestamp[0])

    storage, _ = open_storage(str(root))
    writer = SegmentWriter(storage, str(root / partition_dir), SegmentLimits(segment_bytes=2**40))
    next_offset = 0
    for batches in segments:
        base = header(batches[0])[0] if batches else next_offset
        writer.roll(base, mtime_ms)
        for b in batches:
            first, last, max_ts = header(b)
            writer.append(b, first, last, max_ts)
            next_offset = last + 1
    writer.close(mtime_ms)


def read_log(root: Path, partition_dir: str) -> list[dict]:
    """Every record of a partition (deep scan), segment by segment."""
    from segment_io.layout import list_partition
    from segment_io.segment.reader import SegmentReader
    from segment_io.storage import open_storage
    from segment_io.topic_partition import TopicPartition

    storage, path = open_storage(str(root / partition_dir))
    topic, _, part = partition_dir.rpartition("-")
    listing = list_partition(storage, path, TopicPartition(topic, int(part)))
    rows = []
    for seg in listing.segments:
        reader = SegmentReader(storage, seg.log.path, seg.base_offset)
        for rb in reader.record_batches(topic, int(part)):
            rows += rb.to_pylist()
    return rows


def rewrite_partition(root: Path, partition_dir: str, rows: list[dict]) -> None:  # type: ignore[type-arg]
    """Replace a partition's segments with one segment holding `rows` (records as `read_log`
    gives them), one v2 batch each, in offset order."""
    import shutil

    shutil.rmtree(root / partition_dir)
    batches = [
        v2_batch(
            r["offset"],
            [(0, r["timestamp"], r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]])],
        )
        for r in sorted(rows, key=lambda r: r["offset"])
    ]
    write_log(root, partition_dir, [batches])


def read_batches(root: Path, partition_dir: str) -> list[tuple[int, bytes]]:
    """(segment base offset, raw batch bytes) of every batch of a partition."""
    from segment_io.layout import list_partition
    from segment_io.segment.reader import SegmentReader
    from segment_io.storage import open_storage
    from segment_io.topic_partition import TopicPartition

    storage, path = open_storage(str(root / partition_dir))
    topic, _, part = partition_dir.rpartition("-")
    out = []
    for seg in list_partition(storage, path, TopicPartition(topic, int(part))).segments:
        reader = SegmentReader(storage, seg.log.path, seg.base_offset)
        out += [(seg.base_offset, bytes(reader.batch_bytes(i))) for i in range(len(reader.scan().table))]
    return out


def spark_submit(*args: str) -> list[str]:
    """spark-submit's command line with `args`, its driver JVM started as segpipe starts its own
    (the quick compiler, the install's class archive): the tests' submissions are short runs."""
    from pipelines.runtime.session import DRIVER_JAVA_OPTIONS, driver_java_options

    submit = str(Path(sys.executable).parent / "spark-submit")
    return [submit, "--conf", f"{DRIVER_JAVA_OPTIONS}={driver_java_options()}", *args]


# `--conf` flags giving the driver JVM a 1 KB heap: a command that starts Spark with them fails,
# so a test shows a run works without a JVM by passing them.
NO_JVM = ("--conf", "spark.driver.memory=1k")


def run_segpipe(
    *args: str, env: dict[str, str] | None = None, fault: str | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """The command line as an operator runs it (`python -m pipelines.cli ARGS`): a process of its
    own process group, from the repository's root, forked from an interpreter that has imported
    segpipe already (tests.command_server); `fault` arms a SEGPIPE_FAULT kill point. Nothing of it
    outlives the call."""
    full = {k: v for k, v in os.environ.items() if k != "SEGPIPE_FAULT"}
    full.update(env or {})
    full["PYSPARK_PYTHON"] = sys.executable
    if fault:
        from pipelines.runtime.faults import known_point

        assert known_point(fault.partition(":")[0]), f"{fault}: no such point in FAULT_POINTS"
        full["SEGPIPE_FAULT"] = fault
    return command_server.run(list(args), full, timeout)


def sigterm_once_staged(*args: str, where: Path) -> subprocess.CompletedProcess[str]:
    """The command line (`args`) stopped with SIGTERM once it has staged its output in `where`
    (bounded: a minute, or until it ends on its own)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipelines.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not any(where.glob(".*.segpipe-staging-*")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)  # bounded by the deadline
    proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        kill_group(proc.pid)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def flip_byte(path: Path, at: int, mask: int = 0x55) -> None:
    """Damage one byte of a file in place (a negative `at` counts from the end)."""
    data = bytearray(path.read_bytes())
    data[at] ^= mask
    path.write_bytes(bytes(data))


@contextlib.contextmanager
def lock_held(path: Path) -> Iterator[None]:
    """Another process holds a POSIX lock on `path` (what a running Kafka broker does to its
    `.lock`) while the block runs."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys; f = open(sys.argv[1], 'a'); fcntl.lockf(f, fcntl.LOCK_EX); "
            "print('held', flush=True); sys.stdin.read()",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.communicate(input="", timeout=30)


def files_of(root: Path) -> dict[str, bytes]:
    """Every file of a log directory by relative path, segpipe's own folder left out."""
    from segment_io.layout import META_DIR

    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and META_DIR not in p.parts
    }


def dumped(path: Path, *args: str) -> dict[str, list[dict]]:  # type: ignore[type-arg]
    """`segpipe dump` of a log directory (with more of dump's `args`), per partition directory name."""
    import json

    proc = run_segpipe("dump", str(path), *args)
    assert proc.returncode == ExitCode.OK, proc.stderr
    rows: dict[str, list[dict]] = {}  # type: ignore[type-arg]
    for line in proc.stdout.splitlines():
        row = json.loads(line)
        rows.setdefault(f"{row['topic']}-{row['partition']}", []).append(row)
    return rows


def samples_job(directory: Path, head: str) -> Path:
    """A job file in `directory`: `head` (its keys but `configs`), then the bundled samples'
    topic configs (conf/samples.yaml) as its `configs`."""
    job = directory / "job.yaml"
    samples = (REPO / "conf" / "samples.yaml").read_text()
    job.write_text(head + "configs:\n" + "".join(f"  {line}\n" for line in samples.splitlines()))
    return job


def spark_jobs_of(spark: Any, stage: str) -> int:
    """How many Spark jobs a job's stage (`compact`, `copy`, ...) has run in this session so far:
    a run meant to work on Spark shows it did by adding some."""
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(f"segpipe-{stage}") or [])


def clean_in_session(
    spark: Any, src: Path | str, dst: Path, now_ms: int, sets: list[str] | None = None
) -> None:
    """`segpipe clean SRC DST --config conf/samples.yaml` (or with `--set` of `sets` alone), run
    in this process's Spark session: the reference a test compares a command's bytes with,
    without a JVM of the command's own."""
    from pipelines.config.job import load_job_config
    from pipelines.jobs.clean import clean

    config = load_job_config(None, sets) if sets else load_job_config(str(REPO / "conf" / "samples.yaml"))
    clean(spark, str(src), str(dst), config, now_ms=now_ms, log=lambda _: None)
