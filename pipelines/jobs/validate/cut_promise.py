"""A cut's promise, judged from its source: `validate OUT --against SRC` where OUT is a `cut`'s
output. The cut is worked out again from SRC alone (its batch headers, the offset or time the
manifest records: the terms, as a clean's configs and `now` are), by the same truncation rule the
cut ran (pipelines.log.truncation); then each OUT partition must hold exactly the segments that
rule leaves, each `.log` byte for byte SRC's up to the cut (whole where nothing of it was cut, empty
where the cut leaves an empty segment). The output's own checkpoints and report are not taken."""

from __future__ import annotations

import hashlib
from typing import Any

from pipelines.jobs.validate.checks import PartitionVerdicts
from pipelines.log.truncation import PartitionCut, cut_at
from pipelines.output.staging import CUT_JOB, MANIFEST_JOB
from segment_io.layout import LOG_START_CHECKPOINT, LogDirListing, PartitionListing, list_log_dir
from segment_io.remote.view import described
from segment_io.segment.reader import SegmentReader
from segment_io.storage import Location

CUT_RULE = "cut_is_the_source_truncated"


def is_cut(manifest: dict[str, Any] | None) -> bool:
    """Whether a segpipe manifest is a cut's (whose promise this module judges)."""
    return (manifest or {}).get(MANIFEST_JOB) == CUT_JOB


def cut_verdicts(
    source: Location,
    output: Location,
    listing: LogDirListing,
    manifest: dict[str, Any],
    verdicts: PartitionVerdicts,
) -> None:
    """One verdict per OUT partition under CUT_RULE, and one failed per SRC partition of a topic OUT
    holds that OUT lacks (a cut keeps every partition of the topics it keeps)."""
    src = list_log_dir(source.storage, source.path)
    by_tp = {p.tp: p for p in src.partitions}
    starts = src.checkpoints.get(LOG_START_CHECKPOINT, {})
    for part in listing.partitions:
        tp = part.tp
        if tp not in by_tp:
            verdicts.add(
                CUT_RULE, tp.topic, tp.partition, False, f"{described(source.url)} holds no {tp.dir_name}"
            )
            continue
        problems = _problems(source, by_tp[tp], output, part, manifest, starts.get(tp, 0))
        verdicts.add(CUT_RULE, tp.topic, tp.partition, not problems, "; ".join(problems))
    held, topics = {p.tp for p in listing.partitions}, {p.tp.topic for p in listing.partitions}
    for tp in sorted(t for t in by_tp if t.topic in topics and t not in held):
        verdicts.add(
            CUT_RULE, tp.topic, tp.partition, False, f"the output holds no {tp.dir_name}, which the cut keeps"
        )


def _problems(
    source: Location,
    src: PartitionListing,
    output: Location,
    out: PartitionListing,
    manifest: dict[str, Any],
    log_start: int,
) -> list[str]:
    tables = [SegmentReader(source.storage, f.log.path, f.base_offset).scan().table for f in src.segments]
    cut = cut_at(
        source.storage, src, tables, manifest.get("until_offset"), manifest.get("until_time"), log_start
    )
    expected = _expected(source, src, tables, cut)
    found = {f.base_offset: f for f in out.segments}
    problems = []
    if sorted(found) != sorted(expected):
        problems.append(f"segments at {sorted(found)}, the cut of the source leaves {sorted(expected)}")
    for base in sorted(set(found) & set(expected)):
        data = output.storage.read(found[base].log.path)
        if _digest(data) != expected[base][0] or len(data) != expected[base][1]:
            problems.append(
                f"segment {base}: {len(data)} bytes that are not the source's first "
                f"{expected[base][1]} up to the cut"
            )
    return problems


def _expected(
    source: Location, src: PartitionListing, tables: list[Any], cut: PartitionCut
) -> dict[int, tuple[bytes, int]]:
    """Base offset -> (SHA-256, size) of each `.log` the cut leaves."""
    out = {}
    for files, table, kept in zip(src.segments, tables, cut.kept_batches, strict=True):
        if kept is None:
            continue
        end = files.size if kept == len(table) else (int(table.position[kept]) if kept else 0)
        data = source.storage.read(files.log.path, 0, end) if end else b""
        out[files.base_offset] = (_digest(data), len(data))
    if cut.empty_at is not None:
        out[cut.empty_at] = (_digest(b""), 0)
    return out


def _digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()
