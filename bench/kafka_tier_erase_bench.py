"""`erase --in-place` on Kafka's own tiered storage, timed against a live broker while consumers
read: Kafka's broker (tests/kafka, LocalTieredStorage) tiers a topic of --partitions partitions of
--mb-per-partition MB in segments of --segment-mb MB (1 KiB values, lz4); one listed key sits in
every segment, so every remote segment is rewritten and swapped. Consumers read the whole topic
from offset 0 in a loop, both isolation levels in turn, throughout the run.

Prints the segments swapped and their bytes, the run's wall time, per stage (scan, erase, proof,
swap) and per swapped segment, the grace period waited, and the consumers' passes and fetch
errors (which must be 0).

    .venv/bin/python bench/kafka_tier_erase_bench.py --partitions 2 --mb-per-partition 64 --segment-mb 8
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

from tests.helpers import run_segpipe  # noqa: E402
from tests.kafka.test_kafka_tier_broker import wait_until  # noqa: E402
from tests.kafka.test_kafka_tier_erase import Readers  # noqa: E402

TOPIC = "tiered"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--mb-per-partition", type=int, default=64)
    ap.add_argument("--segment-mb", type=int, default=8)
    ap.add_argument("--grace-ms", type=int, default=5000)
    args = ap.parse_args()

    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    import tests.kafka.test_kafka_tier_erase as erase_test
    from tests.kafka.test_kafka_tier_broker import tiered_broker

    erase_test.PARTITIONS = args.partitions  # what the readers read
    erase_test.NAMES = [f"{TOPIC}-{p}" for p in range(args.partitions)]
    home = Path(tempfile.mkdtemp(prefix="segpipe-kt-erase-"))
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
        per_partition = (args.mb_per_partition << 20) // 1024
        start = time.perf_counter()
        pool = [os.urandom(1024) for _ in range(4096)]  # incompressible, repeats too far apart for lz4
        for i in range(per_partition):
            value = pool[i % len(pool)]
            for p in range(args.partitions):
                producer.send(TOPIC, key=b"k%04d" % (i % 5000), value=value, partition=p)
        producer.flush()
        producer.close()
        print(
            f"produced {args.partitions} x {args.mb_per_partition} MB in {time.perf_counter() - start:.1f} s"
        )

        def tiered() -> bool:
            return all(
                len(list((broker.log_dir / f"{TOPIC}-{p}").glob("*.log"))) == 1
                for p in range(args.partitions)
            )

        wait_until(tiered, "tier every inactive segment")
        keys = home / "keys.txt"
        keys.write_text("k0007\n")
        readers = Readers(broker)
        thread = threading.Thread(target=readers.run, daemon=True)
        thread.start()
        report = home / "report.json"
        start = time.perf_counter()
        proc = run_segpipe(
            "erase",
            str(broker.log_dir),
            "--kafka-tier",
            str(home / "server.properties"),
            "--bootstrap-server",
            broker.bootstrap,
            "--in-place",
            "--keys",
            str(keys),
            "--grace-ms",
            str(args.grace_ms),
            "--report",
            str(report),
        )
        wall = time.perf_counter() - start
        readers.stop.set()
        thread.join()
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(report.read_text())
        swapped = doc["kafka_tier"]["swapped"]
        n = len(swapped)
        mb = sum(s["bytes_before"] for s in swapped) / 2**20
        stages = doc["seconds_by_stage"]
        print(
            f"swapped {n} segments ({mb:.0f} MB) in {wall:.1f} s, whole process; "
            f"{doc['records_erased']:,} records erased"
        )
        print("stages: " + ", ".join(f"{k} {v:.2f} s" for k, v in stages.items()))
        busy = (
            stages.get("erase", 0)
            + stages.get("prove", 0)
            + stages.get("swap", 0)
            - doc["kafka_tier"]["grace_waited_s"]
        )
        print(
            f"per swapped segment: {busy / max(n, 1):.2f} s (erase, proof, upload and records; "
            f"grace waited {doc['kafka_tier']['grace_waited_s']:.1f} s once for all)"
        )
        print(f"consumer passes during the run: {len(readers.passes)}, fetch errors: {len(readers.errors)}")
        for e in readers.errors[:5]:
            print("  ", e)
    finally:
        broker.kill()


if __name__ == "__main__":
    main()
