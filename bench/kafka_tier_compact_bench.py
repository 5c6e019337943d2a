"""`clean --in-place --kafka-tier` (compaction of Kafka's tiered storage), timed against a live
broker while consumers read: Kafka's broker (tests/kafka, LocalTieredStorage) tiers a keyed topic
with delete retention, of --partitions partitions of --mb-per-partition MB in segments of
--segment-mb MB (1 KiB values, lz4), each key written --versions times over the partition, so
every remote segment but the last holds superseded records. Consumers read the whole topic from
offset 0 in a loop, both isolation levels in turn, throughout the run.

Prints the remote MB compacted per second (the remote log read, compacted, proved and swapped),
the bytes before and after, the run's wall time per stage, the peak memory of its process tree
(by kind of process, and its anonymous memory, which leaves out the page cache of files), and
the consumers' passes and fetch errors (which must be 0).

    .venv/bin/python bench/kafka_tier_compact_bench.py --partitions 2 --mb-per-partition 256 --segment-mb 64
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from measure import run_measured  # noqa: E402

from tests.kafka.test_kafka_tier_broker import wait_until  # noqa: E402
from tests.kafka.test_kafka_tier_erase import Readers  # noqa: E402

TOPIC = "tiered"
VALUE_BYTES = 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--mb-per-partition", type=int, default=256)
    ap.add_argument("--segment-mb", type=int, default=64)
    ap.add_argument("--versions", type=int, default=4, help="how many times each key is written")
    ap.add_argument("--grace-ms", type=int, default=5000)
    args = ap.parse_args()

    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    import tests.kafka.test_kafka_tier_erase as erase_test
    from tests.kafka.test_kafka_tier_broker import tiered_broker

    erase_test.PARTITIONS = args.partitions  # what the readers read
    erase_test.NAMES = [f"{TOPIC}-{p}" for p in range(args.partitions)]
    # A pass reads the whole topic: its bound grows with it (about 20 MB/s per consumer here).
    erase_test.PASS_TIMEOUT_S = max(60, 2 * args.partitions * args.mb_per_partition // 10)
    home = Path(tempfile.mkdtemp(prefix="segpipe-kt-compact-"))
    broker = tiered_broker(home)
    try:
        broker.start()
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        configs = {
            "remote.storage.enable": "true",
            "segment.bytes": str(args.segment_mb << 20),
            "local.retention.bytes": "1",
            "retention.ms": "-1",
        }
        admin.create_topics([NewTopic(TOPIC, args.partitions, 1, topic_configs=configs)])
        admin.close()
        producer = KafkaProducer(
            bootstrap_servers=broker.bootstrap,
            acks=1,
            compression_type="lz4",
            linger_ms=20,
            batch_size=256 << 10,
        )
        per_partition = (args.mb_per_partition << 20) // VALUE_BYTES
        keys = max(per_partition // args.versions, 1)
        start = time.perf_counter()
        pool = [os.urandom(VALUE_BYTES) for _ in range(4096)]  # incompressible, repeats too far apart for lz4
        for i in range(per_partition):
            value = pool[i % len(pool)]
            for p in range(args.partitions):
                producer.send(TOPIC, key=b"k%09d" % (i % keys), value=value, partition=p)
        producer.flush()
        producer.close()
        print(
            f"produced {args.partitions} x {args.mb_per_partition} MB ({keys:,} keys per partition, "
            f"each {args.versions} times) in {time.perf_counter() - start:.1f} s"
        )

        def tiered() -> bool:
            return all(
                len(list((broker.log_dir / f"{TOPIC}-{p}").glob("*.log"))) == 1
                for p in range(args.partitions)
            )

        wait_until(tiered, "tier every inactive segment")
        readers = Readers(broker)
        thread = threading.Thread(target=readers.run, daemon=True)
        thread.start()
        report = home / "report.json"
        cmd = [
            sys.executable,
            "-m",
            "pipelines.cli",
            "clean",
            str(broker.log_dir),
            "--kafka-tier",
            str(home / "server.properties"),
            "--bootstrap-server",
            broker.bootstrap,
            "--in-place",
            "--topic-set",
            f"{TOPIC}:cleanup.policy=compact",
            "--grace-ms",
            str(args.grace_ms),
            "--report",
            str(report),
        ]
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
        wall, peaks = run_measured(cmd, env, "clean --in-place --kafka-tier")
        readers.stop.set()
        thread.join()
        doc = json.loads(report.read_text())
        tier = doc["kafka_tier"]
        swapped = tier["swapped"]
        before_mb = tier["remote_bytes_before"] / 2**20
        after_mb = tier["remote_bytes_after"] / 2**20
        removed = sum(s["records_before"] - s["records_after"] for s in swapped)
        print(
            f"compacted {before_mb:.0f} MB of remote segments to {after_mb:.0f} MB in {wall:.1f} s, "
            f"whole process: {before_mb / wall:.1f} MB/s; {len(swapped)} segments swapped, "
            f"{removed:,} records removed, {tier['unchanged_segments']} unchanged"
        )
        stages = doc["seconds_by_stage"]
        print("stages: " + ", ".join(f"{k} {v:.2f} s" for k, v in stages.items()))
        print(f"grace waited {tier['grace_waited_s']:.1f} s; {tier['seconds_per_swap']:.2f} s per swap")
        kinds = ", ".join(f"{k} {v / 2**20:.0f} MB" for k, v in sorted(peaks.rss.items()))
        print(
            f"peak memory: {peaks.total / 2**20:.0f} MB resident ({kinds}); "
            f"{peaks.anon / 2**20:.0f} MB anonymous"
        )
        print(f"consumer passes during the run: {len(readers.passes)}, fetch errors: {len(readers.errors)}")
        for e in readers.errors[:5]:
            print("  ", e)
    finally:
        broker.kill()


if __name__ == "__main__":
    main()
