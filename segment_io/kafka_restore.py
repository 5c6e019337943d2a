"""Restoring a log directory (segpipe's output, or any archive) into a stopped Kafka broker's log
directory whose topics exist: the procedure `segpipe restore-kafka` runs and the README states.

What a restore replaces and what it keeps, per partition directory:
- replaced: the segments (`.log`, `.index`, `.timeindex`, `.txnindex`), producer-state
  snapshots and `leader-epoch-checkpoint`: the archive's;
- kept: `partition.metadata`, the topic id the broker's metadata knows (the archive's would name
  a topic id this cluster never had, and the broker would refuse to load the partition);
- the root checkpoints take the archive's entries for the restored partitions and keep the
  broker's others: recovery point and high watermark (both the archive's log end, so the log
  loads without recovery and consumers see all of it), log start offset, cleaner checkpoint;
- the broker's `.kafka_cleanshutdown` marker stays: the log loads as cleanly stopped, without
  recovery, which is why every segment is verified (CRCs, framing, indexes, offset ranges) and
  an unfinished output refused before anything moves: a broker would serve what it is given.
The broker must be stopped: its `.lock` is taken for the whole restore. What is replaced is moved
to a backup directory outside the log directory first, so a restore can be undone.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from segment_io.broker_lock import broker_stopped
from segment_io.checkpoints import format_offset_checkpoint, parse_offset_checkpoint
from segment_io.errors import SegpipeError
from segment_io.layout import PARTITION_METADATA, ROOT_CHECKPOINTS, ignored_dir_reason, parse_topic_partition
from segment_io.partition import inspect_log_dir
from segment_io.storage.local import LocalStorage, sync_directory
from segment_io.text import counted
from segment_io.topic_partition import TopicPartition

KEPT = PARTITION_METADATA


class RestoreRefused(SegpipeError):
    """The broker's log directory is not ready for a restore; nothing was changed."""


@dataclass(frozen=True)
class RestoreSummary:
    partitions: tuple[str, ...]
    files: int
    bytes: int
    backup: str


def _archive_partitions(archive: Path) -> list[Path]:
    """The partition directories of `archive`, by Kafka's naming rules."""
    return sorted(p for p in archive.iterdir() if p.is_dir() and ignored_dir_reason(p.name) is None)


def verify_archive(archive: Path) -> None:
    """Every segment of `archive` is whole and valid (CRCs, framing, indexes, offset ranges) and
    the archive is a finished output; else the first problem is raised (file and byte)."""
    _, reports = inspect_log_dir(LocalStorage(), str(archive))
    for report in reports:
        if report.errors:
            raise report.errors[0]
        for segment in report.segments:
            if segment.errors:
                raise RestoreRefused(f"{segment.path}: {segment.errors[0]}")


def check(archive: Path, log_dir: Path, backup: Path) -> list[Path]:
    """Every reason to refuse, before anything changes; returns the archive's partitions."""
    if not (log_dir / "meta.properties").exists():
        raise RestoreRefused(f"{log_dir} is not a Kafka log directory (no meta.properties)")
    if backup.exists() and any(backup.iterdir()):
        raise RestoreRefused(f"the backup directory {backup} is not empty")
    if backup.resolve().is_relative_to(log_dir.resolve()):
        raise RestoreRefused(
            f"the backup directory {backup} is inside the log directory (Kafka would load it)"
        )
    parts = _archive_partitions(archive)
    if not parts:
        raise RestoreRefused(f"no partition directories in {archive}")
    missing = [p.name for p in parts if not (log_dir / p.name / KEPT).exists()]
    if missing:
        raise RestoreRefused(
            f"{counted(len(missing), 'partition')} missing on the broker ({', '.join(missing[:5])}): "
            "create their topics with the same partition counts and configs, wait until the broker "
            "made them, stop it, then restore"
        )
    return parts


def _entries(path: Path) -> dict[TopicPartition, int]:
    return parse_offset_checkpoint(path.read_bytes(), str(path)) if path.exists() else {}


def _merge_checkpoint(log_dir: Path, archive: Path, name: str, restored: set[TopicPartition]) -> None:
    """The broker's entries for partitions not restored, the archive's for those restored."""
    entries = {tp: o for tp, o in _entries(log_dir / name).items() if tp not in restored}
    entries.update({tp: o for tp, o in _entries(archive / name).items() if tp in restored})
    LocalStorage().write_atomic(str(log_dir / name), format_offset_checkpoint(entries))


def restore_into_kafka(
    archive: Path,
    log_dir: Path,
    backup: Path,
    hold: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> RestoreSummary:
    """Replace the partitions of a stopped broker's `log_dir` with those of `archive` (see the
    module's rules); the replaced files and checkpoints go to `backup` first. The replacement runs
    inside `hold()`: the caller's way of keeping a stop signal from leaving a half-restored log
    directory (the checks and the archive's verification before it stay stoppable)."""
    with broker_stopped(LocalStorage(), str(log_dir), "restore-kafka"):
        parts = check(archive, log_dir, backup)
        verify_archive(archive)
        with hold():
            return _restore(archive, log_dir, backup, parts)


def _restore(archive: Path, log_dir: Path, backup: Path, parts: list[Path]) -> RestoreSummary:
    backup.mkdir(parents=True, exist_ok=True)
    for name in ROOT_CHECKPOINTS:
        if (log_dir / name).exists():
            shutil.copy2(log_dir / name, backup / name)
    files = size = 0
    local = LocalStorage()
    for part in parts:
        target = log_dir / part.name
        saved = backup / part.name
        saved.mkdir()
        for f in target.iterdir():
            if f.name != KEPT:
                shutil.move(str(f), saved / f.name)
        for f in sorted(part.iterdir()):
            if f.is_file() and f.name != KEPT:
                info = f.stat()
                local.copy(str(f), str(target / f.name), info.st_mtime_ns // 1_000_000)  # fsynced
                files += 1
                size += info.st_size
        sync_directory(str(target))
    restored = {tp for tp in (parse_topic_partition(p.name) for p in parts) if tp is not None}
    for name in ROOT_CHECKPOINTS:
        _merge_checkpoint(log_dir, archive, name, restored)
    sync_directory(str(log_dir))
    return RestoreSummary(tuple(p.name for p in parts), files, size, str(backup))
