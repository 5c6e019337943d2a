"""The two-tier log as a state machine (hypothesis) on moto's S3: random sequences of appended
segments, compactions of the local log (which merge segments), `tier` with random local
retention, `clean --in-place` of the remote tier, expiry at random clock advances, `restore`, and
runs stopped at random fault points. After every step the local log and its remote tier read as
the model says: every record is one that was appended, unchanged at its offset, and none that
Kafka's rules keep is missing (every key's latest record, the log's end). Examples per run:
SEGPIPE_MODEL_EXAMPLES (CI: the default below)."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from pipelines.config import JobConfig
from pipelines.jobs.clean.in_place import clean_in_place
from pipelines.jobs.clean.job import clean
from pipelines.jobs.clean.request import CleanRequest
from pipelines.jobs.tier import job as tier_job
from pipelines.jobs.tier import release as tier_release
from pipelines.jobs.tier.expire import expire
from pipelines.jobs.tier.restore import restore
from segment_io.layout import list_log_dir
from segment_io.remote.view import tiered_url
from segment_io.segment.reader import SegmentReader
from segment_io.storage import open_storage
from tests.conftest import FIXED_NOW_MS
from tests.helpers import v2_batch, write_log
from tests.s3.stores import in_session_workers
from tests.s3.test_tier_s3 import bucket

pytestmark = pytest.mark.s3
EXAMPLES = int(os.environ.get("SEGPIPE_MODEL_EXAMPLES", "25"))
PARTITION = "events-0"
T0 = FIXED_NOW_MS - 3_600_000
DAY = 86_400_000
Record = tuple[int, bytes, bytes, int]  # offset, key, value, timestamp
KEEP = {"retention.ms": -1}
COMPACT = {"retention.ms": -1, "cleanup.policy": "compact"}
TIER_FAULTS = ("before-upload", "after-upload", "after-commit", "mid-release")


class Crash(BaseException):
    """A run stopped dead at a fault point: nothing after it runs (what a kill leaves)."""


def quiet(line: str) -> None:
    del line


def read_records(local: Path, remote: str | None) -> list[Record]:
    """Every record of the local log and its remote tier, read as one log (segpipe's own view)."""
    storage, root = open_storage(tiered_url(remote, str(local)) if remote else str(local))
    out: list[Record] = []
    for part in list_log_dir(storage, root).partitions:
        for seg in part.segments:
            for batch in SegmentReader(storage, seg.log.path, seg.base_offset).record_batches("events", 0):
                rows = batch.to_pydict()
                out += zip(rows["offset"], rows["key"], rows["value"], rows["timestamp"], strict=True)
    return out


class TwoTierLog(RuleBasedStateMachine):
    """One partition, its local log directory and its remote tier on S3."""

    env: dict[str, str]
    spark: Any
    root: Path
    steps: ClassVar[dict[str, int]] = {}  # how often each rule ran, over every example

    def count(self, name: str) -> None:
        self.steps[name] = self.steps.get(name, 0) + 1

    @initialize()
    def start(self) -> None:
        self.base = self.root / uuid.uuid4().hex
        self.local = self.base / "log"
        self.local.mkdir(parents=True)
        self.remote = bucket(self.env, f"model-{uuid.uuid4().hex[:12]}")
        self.appended: dict[int, Record] = {}
        self.next_offset = 0
        self.clock = 0  # the wall clock's advance (ms), for expiry

    # --- the model's rules ---------------------------------------------------------------------

    @rule(records=st.integers(1, 12), keys=st.integers(1, 6))
    def append_segment(self, records: int, keys: int) -> None:
        """A new segment (the previous last one becomes inactive), as a producer and a roll make."""
        self.count("append_segment")
        batch = [
            (
                i,
                T0 + self.next_offset + i,
                f"k{(self.next_offset + i) % keys}".encode(),
                f"v{self.next_offset + i}".encode(),
                [],
            )
            for i in range(records)
        ]
        tmp = self.base / "append"
        write_log(tmp, PARTITION, [[v2_batch(self.next_offset, batch)]])
        (self.local / PARTITION).mkdir(exist_ok=True)
        for f in (tmp / PARTITION).iterdir():
            shutil.move(str(f), self.local / PARTITION / f.name)
        shutil.rmtree(tmp)
        for delta, ts, key, value, _ in batch:
            offset = self.next_offset + delta
            self.appended[offset] = (offset, key, value, ts)
        self.next_offset += records

    @rule()
    def compact_local(self) -> None:
        """Kafka's cleaner (here: segpipe clean) over the local log: segments merged."""
        self.count("compact_local")
        out = self.base / "cleaned"
        clean(self.spark, str(self.local), str(out), JobConfig.build(COMPACT), now_ms=FIXED_NOW_MS, log=quiet)
        shutil.rmtree(self.local)
        out.rename(self.local)

    @rule(local_ms=st.sampled_from([-2, 0, 10 * DAY]), fault=st.sampled_from((None, *TIER_FAULTS)))
    def tier(self, local_ms: int, fault: str | None) -> None:
        self.count("tier")
        config = JobConfig.build({**KEEP, "local.retention.ms": local_ms})
        try:
            with crash_at(fault):
                tier_job.tier(
                    self.spark,
                    str(self.local),
                    self.remote,
                    config,
                    now_ms=FIXED_NOW_MS,
                    log=quiet,
                    clock=self.wall,
                )
        except Crash:
            pass

    @rule()
    def compact_remote(self) -> None:
        self.count("compact_remote")
        if not self.remote_has_segments():
            return
        clean_in_place(
            self.spark,
            CleanRequest(src=self.remote, config=JobConfig.build(COMPACT), now_ms=FIXED_NOW_MS),
            quiet,
        )

    @rule(advance=st.sampled_from([0, 2 * DAY]))
    def expire_after(self, advance: int) -> None:
        self.count("expire_after")
        self.clock += advance
        if self.remote_has_segments():
            expire(self.remote, JobConfig.build({}), log=quiet, clock=self.wall)

    @rule()
    def restore_equals_the_view(self) -> None:
        self.count("restore_equals_the_view")
        if not self.remote_has_segments():
            return
        dst = self.base / f"restored-{uuid.uuid4().hex[:8]}"
        restore(self.spark, self.remote, str(dst), str(self.local), log=quiet)
        assert read_records(dst, None) == self.read()
        shutil.rmtree(dst)

    # --- what must hold after every step -----------------------------------------------------

    @invariant()
    def the_two_tiers_read_as_the_model_says(self) -> None:
        if not hasattr(self, "appended"):
            return
        records = self.read()
        offsets = [r[0] for r in records]
        assert offsets == sorted(set(offsets))
        for record in records:  # nothing that was not appended, nothing changed
            assert self.appended.get(record[0]) == record, record
        latest = {key: offset for offset, key, _, _ in sorted(self.appended.values())}
        missing = sorted(set(latest.values()) - set(offsets))
        assert not missing, f"every key's latest record stays; missing offsets {missing}"

    # --- helpers -------------------------------------------------------------------------------

    def wall(self) -> int:
        import time

        return int(time.time() * 1000) + self.clock

    def read(self) -> list[Record]:
        return read_records(self.local, self.remote if self.remote_has_segments() else None)

    def remote_has_segments(self) -> bool:
        from segment_io.remote.tier import RemoteTier

        return RemoteTier.is_tier(self.remote)


class crash_at:
    """Make `fault` a point where the run stops dead (an exception no job catches)."""

    def __init__(self, fault: str | None) -> None:
        self.fault = fault
        self.patched: list[tuple[Any, Any]] = []

    def __enter__(self) -> None:
        def point(name: str) -> None:
            if name == self.fault:
                raise Crash(name)

        for module in (tier_job, tier_release):
            self.patched.append((module, module.fault_point))
            module.fault_point = point  # type: ignore[attr-defined]

    def __exit__(self, *exc: object) -> None:
        for module, original in self.patched:
            module.fault_point = original  # type: ignore[attr-defined]


def test_the_two_tier_log_never_loses_a_record(
    spark: Any, s3_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_session_workers(spark, s3_env, monkeypatch)
    TwoTierLog.env, TwoTierLog.spark, TwoTierLog.root = s3_env, spark, tmp_path
    machine = settings(
        max_examples=EXAMPLES,
        stateful_step_count=10,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=os.environ.get("SEGPIPE_MODEL_SEED") is None,
    )(TwoTierLog)
    machine.TestCase().runTest()
    print(f"two-tier model: {EXAMPLES} examples, steps run: {TwoTierLog.steps}")
    assert all(TwoTierLog.steps.get(rule, 0) > 0 for rule in ("append_segment", "compact_local", "tier"))
