"""Reading a Kafka remote tier against reading the same records from a plain log directory.

The tier is tests/data/kip405's encrypted one (what a broker wrote through Aiven's plugin: chunks
of 16 KiB, each zstd-compressed and AES-256-GCM-encrypted; 20,000 records in 2 partitions). The
plain log directory is `segpipe restore` of it (the same segments, decoded once). Each read opens
the log afresh (the tier's metadata replayed, every data key unwrapped, every chunk fetched and
transformed back), verifies every batch's CRC and decodes every record to Arrow, in one process.
Prints records/s of each and their ratio (best of --runs).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from segment_io.kafka_tier.url import kafka_tier_url  # noqa: E402
from segment_io.layout import list_log_dir  # noqa: E402
from segment_io.segment.reader import SegmentReader  # noqa: E402
from segment_io.storage import open_storage  # noqa: E402
from tests.kip405 import ENCRYPTED, tier  # noqa: E402


def read_all(url: str) -> int:
    storage, root = open_storage(url)
    count = 0
    for part in list_log_dir(storage, root).partitions:
        for seg in part.segments:
            reader = SegmentReader(storage, seg.log.path, seg.base_offset)
            reader.verify_crcs()
            count += sum(rb.num_rows for rb in reader.record_batches(part.tp.topic, part.tp.partition))
    return count


def best(url: str, runs: int) -> tuple[int, float]:
    times, count = [], 0
    for _ in range(runs):
        start = time.perf_counter()
        count = read_all(url)
        times.append(time.perf_counter() - start)
    return count, min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t = tier(ENCRYPTED, Path(tmp))
        plain = Path(tmp) / "plain"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pipelines.cli",
                "restore",
                str(t.logdir),
                str(plain),
                "--kafka-tier",
                str(t.settings),
            ],
            check=True,
            capture_output=True,
            cwd=ROOT,
        )
        read_all(str(plain))  # compile and warm both paths once
        tiered_url = kafka_tier_url(str(t.settings), str(t.logdir))
        read_all(tiered_url)
        n_plain, s_plain = best(str(plain), args.runs)
        n_tier, s_tier = best(tiered_url, args.runs)
        assert n_plain == n_tier, (n_plain, n_tier)
        print(
            f"plain log directory: {n_plain:,} records in {s_plain * 1000:.1f} ms = {n_plain / s_plain:,.0f} records/s"
        )
        print(
            f"Kafka remote tier (zstd + AES-GCM): {n_tier:,} records in {s_tier * 1000:.1f} ms = "
            f"{n_tier / s_tier:,.0f} records/s"
        )
        print(f"ratio: {s_tier / s_plain:.2f}x the plain read's time")


if __name__ == "__main__":
    main()
