"""segment_io throughput on one core, warm page cache: shallow scan, deep scan, write, copy.

Prints one line per codec. Data: records of about 100 bytes (11-byte key, 80-byte text value),
200 records per batch, written once into bench/data/ and reused.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from segment_io.format.batch import build_v2_batch  # noqa: E402
from segment_io.format.compression import compress, decompress  # noqa: E402
from segment_io.format.constants import Codec  # noqa: E402
from segment_io.format.record_columns import RecordColumns  # noqa: E402
from segment_io.segment.reader import SegmentReader  # noqa: E402
from segment_io.segment.scan import scan_buffer  # noqa: E402
from segment_io.segment.writer import SegmentLimits, SegmentWriter  # noqa: E402
from segment_io.storage import Storage, open_storage  # noqa: E402

PER_BATCH = 200
TS = 1_700_000_000_000


def batch_columns(rng: np.random.Generator, pool: np.ndarray, n: int) -> RecordColumns:
    keys = np.frombuffer(b"".join(b"k%010d" % k for k in rng.integers(0, 1_000_000, n)), dtype=np.uint8)
    starts = rng.integers(0, len(pool) - 100, n)
    values = np.concatenate([pool[s : s + 80] for s in starts])
    z = np.zeros(n + 1, dtype=np.int64)
    return RecordColumns(
        np.arange(n, dtype=np.int64),
        np.arange(n, dtype=np.int64),
        np.arange(0, 11 * (n + 1), 11, dtype=np.int64),
        keys,
        np.zeros(n, np.bool_),
        np.arange(0, 80 * (n + 1), 80, dtype=np.int64),
        values,
        np.zeros(n, np.bool_),
        z,
        np.zeros(1, np.int64),
        np.zeros(0, np.uint8),
        np.zeros(1, np.int64),
        np.zeros(0, np.uint8),
        np.zeros(0, np.bool_),
    )


def make_sections(records: int) -> list[tuple[bytes, int]]:
    rng = np.random.default_rng(1)
    words = b"order customer amount status shipped pending region sku quantity price payment ".split()
    pool = np.frombuffer(b" ".join(words[i] for i in rng.integers(0, len(words), 200_000)), dtype=np.uint8)
    return [(batch_columns(rng, pool, PER_BATCH).encode(), PER_BATCH) for _ in range(records // PER_BATCH)]


def write_segment(
    storage: Storage, directory: str, sections: list[tuple[bytes, int]], codec: Codec
) -> tuple[str, float, int]:
    t0 = time.perf_counter()
    writer = SegmentWriter(storage, directory, SegmentLimits(segment_bytes=2**31 - 1))
    offset = 0
    raw = 0
    for section, n in sections:
        batch = build_v2_batch(
            base_offset=offset,
            records=compress(codec, section),
            records_count=n,
            last_offset_delta=n - 1,
            base_timestamp=TS,
            max_timestamp=TS + n - 1,
            attributes=int(codec),
        )
        writer.append(batch, offset, offset + n - 1, TS + n - 1)
        offset += n
        raw += len(section)
    [seg] = writer.close()
    return seg.log_path, time.perf_counter() - t0, raw


def best(fn, repeat: int = 3) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--codecs", default="none,gzip,snappy,lz4,zstd")
    args = parser.parse_args()
    os.environ.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".venv" / "numba-cache"))
    sections = make_sections(args.records)
    data_dir = ROOT / "bench" / "data" / "segment_io"
    storage, _ = open_storage(str(data_dir))
    print(
        f"{args.records} records of ~{len(sections[0][0]) // PER_BATCH} bytes, {PER_BATCH} per batch, one core"
    )
    print(
        f"{'codec':7} {'file MB':>8} {'shallow GB/s':>13} {'deep Mrec/s':>12} {'deep MB/s':>10} {'vs codec':>9} {'write MB/s':>11} {'copy MB/s':>10}"
    )
    for name in args.codecs.split(","):
        print(measure(storage, str(data_dir), sections, name, args.records))


def measure(
    storage: Storage, data_dir: str, sections: list[tuple[bytes, int]], name: str, records: int
) -> str:
    codec = Codec.parse(name)
    directory = f"{data_dir}/{name}-0"
    storage.remove(directory)
    path, write_s, raw = write_segment(storage, directory, sections, codec)
    size = os.path.getsize(path)
    reader = SegmentReader(storage, path, 0)
    buf = reader.buffer
    shallow = best(lambda: scan_buffer(path, 0, buf))
    t = reader.scan().table
    deep = best(lambda: sum(rb.num_rows for rb in SegmentReader(storage, path, 0).record_batches("t", 0)), 2)
    payloads = [
        buf[p + 61 : p + s].tobytes() for p, s in zip(t.position.tolist(), t.size.tolist(), strict=True)
    ]
    codec_only = best(lambda: [decompress(codec, x) for x in payloads], 2) if codec != Codec.NONE else 0.0
    copy_dir = f"{data_dir}/{name}-copy"

    def copy() -> None:
        storage.remove(copy_dir)
        w = SegmentWriter(storage, copy_dir, SegmentLimits(segment_bytes=2**31 - 1))
        mv = buf.data
        rows = zip(
            t.position.tolist(),
            t.size.tolist(),
            t.base_offset.tolist(),
            t.last_offset.tolist(),
            t.max_timestamp.tolist(),
            strict=True,
        )
        for p, s, b, lo, ts in rows:
            w.append(mv[p : p + s], b, lo, ts)
        w.close()

    copy_s = best(copy, 2)
    storage.remove(copy_dir)
    ratio = f"{deep / codec_only:.2f}x" if codec_only else "-"
    return (
        f"{name:7} {size / 1e6:8.1f} {size / shallow / 1e9:13.2f} {records / deep / 1e6:12.2f} "
        f"{raw / deep / 1e6:10.0f} {ratio:>9} {raw / write_s / 1e6:11.0f} {size / copy_s / 1e6:10.0f}"
    )


if __name__ == "__main__":
    main()
