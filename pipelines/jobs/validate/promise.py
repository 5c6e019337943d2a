"""The facts the compaction promise is judged on, computed on the workers one partition per task:
the source partition and the output partition are read side by side (keys, values and headers
reduced to a 64-bit digest, segment_io.segment.digest) and compared with numpy, so no record's
bytes and no per-record join or sort goes through Spark. Measured on the 4 GB bench set (2 cores):
the same rules as Spark joins and windows over digests took 85 s and a broadcast of the source
exhausted a 1 GB driver.

Rows (one DataFrame, PROMISE_DDL, `kind` says which rule a row is for):
- `record`: one per output record; ok = the source holds a record at its offset with the same
  digest and timestamp (`record_from_source`);
- `key`: one per key the output had to keep (`latest_value_kept`; see docs/validation.md):
  below the output's cleaner checkpoint and at or above its log start offset, the key's latest
  source record that was not aborted, if it has a value or is a tombstone the cleaner keeps;
- `count`: one per partition, `n` = source records and `m` = output records (`counts_match`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from segment_io.layout import PartitionListing
from segment_io.storage import open_storage

NAMES = ("kind", "topic", "partition", "offset", "key", "ok", "n", "m")
PROMISE_DDL = "kind string, topic string, partition int, offset long, key binary, ok boolean, n long, m long"
READ = (
    "offset",
    "timestamp",
    "key",
    "is_control",
    "is_transactional",
    "producer_id",
    "magic",
    "delete_horizon_ms",
)
ABORT = 0  # control record type in the key's bytes 2-3 (version int16, type int16): 0 abort, 1 commit


@dataclass(frozen=True)
class PartitionPair:
    """One partition of the output and the same partition of the source (None where absent)."""

    topic: str
    partition: int
    output: PartitionListing | None
    source: PartitionListing | None
    log_start_offset: int | None
    cleaner_offset: int | None


def _read(url: str, part: PartitionListing | None, verify_crc: bool) -> dict[str, Any]:
    """One partition's records as arrays (file order), with the digest of each."""
    from segment_io.segment.digest import record_digests
    from segment_io.segment.reader import SegmentReader

    chunks: dict[str, list[Any]] = {name: [] for name in (*READ, "digest", "has_value")}
    if part is not None:
        storage, _ = open_storage(url)
        for seg in part.segments:
            reader = SegmentReader(storage, seg.log.path, seg.base_offset)
            if verify_crc:
                reader.verify_crcs()
            for batch in reader.record_batches(part.tp.topic, part.tp.partition):
                for name in READ:
                    chunks[name].append(batch.column(name))
                chunks["digest"].append(pa.array(record_digests(batch)))
                chunks["has_value"].append(batch.column("value").is_valid())
    out: dict[str, Any] = {}
    for name, arrays in chunks.items():
        joined = (
            pa.concat_arrays(arrays) if arrays else pa.array([], pa.binary() if name == "key" else pa.int64())
        )
        out[name] = joined if name == "key" else joined.to_numpy(zero_copy_only=False)
    return out


def aborted(records: dict[str, Any]) -> np.ndarray:
    """Per record: a transactional data record whose producer's next control record is an ABORT.
    A record with no control record after it (an open transaction) is not aborted."""
    n = len(records["offset"])
    result = np.zeros(n, dtype=bool)
    txn = records["is_transactional"].astype(bool)
    if not txn.any():
        return result
    control = records["is_control"].astype(bool)
    markers = np.flatnonzero(txn & control)
    types = np.array(
        [
            int.from_bytes(k[2:4], "big") if k and len(k) >= 4 else -1
            for k in records["key"].take(pa.array(markers)).to_pylist()
        ],
        dtype=np.int64,
    )  # fmt: skip  (one per transaction, not per record)
    data = np.flatnonzero(txn & ~control)
    producers = records["producer_id"]
    for producer in np.unique(producers[data]):
        mine = data[producers[data] == producer]
        theirs = markers[producers[markers] == producer]
        following = np.searchsorted(theirs, mine)  # positions: file order is offset order
        has_marker = following < len(theirs)
        result[mine[has_marker]] = types[np.searchsorted(markers, theirs[following[has_marker]])] == ABORT
    return result


def partition_promise(
    pair: PartitionPair, output_url: str, source_url: str, now_ms: int | None
) -> Iterator[pa.RecordBatch]:
    """Executed on a worker: the promise rows of one partition (see the module)."""
    out = _read(output_url, pair.output, verify_crc=False)  # its files passed the structure suite
    src = _read(source_url, pair.source, verify_crc=True)
    topic, partition = pair.topic, pair.partition

    def rows(
        kind: str, offsets: np.ndarray, keys: Any, ok: np.ndarray, counts: tuple[int, int] | None = None
    ) -> pa.RecordBatch:
        n = len(offsets)
        totals = [pa.nulls(n, pa.int64())] * 2
        if counts is not None:
            totals = [pa.array([c], pa.int64()) for c in counts]
        columns = [
            pa.array([kind] * n, pa.string()), pa.array([topic] * n, pa.string()),
            pa.array(np.full(n, partition, np.int32)), pa.array(offsets, pa.int64()), keys, pa.array(ok),
            *totals,
        ]  # fmt: skip
        return pa.RecordBatch.from_arrays(columns, names=list(NAMES))

    # record_from_source: the same offset, digest and timestamp in the source.
    order = np.argsort(src["offset"], kind="stable")
    src_offsets = src["offset"][order]
    at = np.minimum(np.searchsorted(src_offsets, out["offset"]), max(len(src_offsets) - 1, 0))
    same = np.zeros(len(out["offset"]), dtype=bool)
    if len(src_offsets):
        match = order[at]
        same = (
            (src_offsets[at] == out["offset"])
            & (src["digest"][match] == out["digest"])
            & (src["timestamp"][match] == out["timestamp"])
        )
    yield rows("record", out["offset"], out["key"], same)

    # latest_value_kept: only where the output says which section it cleaned.
    if pair.cleaner_offset is not None and len(src["offset"]):
        offsets = src["offset"]
        candidate = (
            (offsets < pair.cleaner_offset)
            & (offsets >= (pair.log_start_offset or 0))
            & ~src["is_control"].astype(bool)
            & src["key"].is_valid().to_numpy(zero_copy_only=False)
            & ~aborted(src)
        )
        chosen = np.flatnonzero(candidate)
        if len(chosen):
            codes = pc.dictionary_encode(src["key"].take(pa.array(chosen))).indices.to_numpy(
                zero_copy_only=False
            )
            # The latest record of each key: its last occurrence (file order is offset order).
            _, from_end = np.unique(codes[::-1], return_index=True)
            latest = chosen[len(chosen) - 1 - from_end]
            horizon = src["delete_horizon_ms"][latest]
            has_horizon = ~np.isnan(horizon) if horizon.dtype.kind == "f" else np.ones(len(latest), bool)
            before_horizon = (
                np.zeros(len(latest), dtype=bool)
                if now_ms is None
                else ~has_horizon | (now_ms < np.nan_to_num(horizon, nan=0))
            )
            tombstone_kept = (src["magic"][latest] == 2) & (~has_horizon | before_horizon)
            required = latest[src["has_value"][latest].astype(bool) | tombstone_kept]
            kept = np.isin(offsets[required], out["offset"])
            yield rows("key", offsets[required], src["key"].take(pa.array(required)), kept)

    yield rows("count", np.zeros(1, np.int64), pa.nulls(1, pa.binary()), np.ones(1, bool),
               (len(src["offset"]), len(out["offset"])))  # fmt: skip


def promise_rows(
    spark: Any, pairs: list[PartitionPair], output_url: str, source_url: str, now_ms: int | None
) -> Any:
    """`partition_promise` of every pair as one DataFrame (PROMISE_DDL), one task per pair."""

    from pipelines.runtime.tasks import one_task_each

    return one_task_each(
        spark, pairs, lambda pair: partition_promise(pair, output_url, source_url, now_ms), PROMISE_DDL
    )
