"""Queries of part of the 4 GB bench set (seven days, 8 partitions, CreateTime) through the
`kafka-segments` source, bounded by its range options (fromTime/toTime, fromOffset/toOffset: the
indexes choose what is read) and by Spark's filter alone (every record read, Spark filters), in
one local[2] session, warm page cache,
each run printed: `count()` and `groupBy("key").count()` of one hour (at the week's middle and
at its end), of an offset range as large, and one offset's lookup. Target: one hour at most 1/10
of the time of the whole read.

    .venv/bin/python bench/pushdown_bench.py [--runs 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clean_bench import DATA, NOW_MS, dir_bytes, generate, size_spec, warm_page_cache  # noqa: E402

HOUR = 3600 * 1000
START = NOW_MS - 8 * 24 * HOUR  # the set's first timestamp (size_spec); it spans seven days


def timed(action: Any) -> tuple[float, Any]:
    began = time.perf_counter()
    result = action()
    return time.perf_counter() - began, result


MID_WEEK_HOUR = (START + 84 * HOUR, START + 85 * HOUR - 1)


def hour_against_whole(spark: Any, src: Path, runs: int) -> list[tuple[float, float]]:
    """(one mid-week hour read through the source's time range, the whole set read) per run,
    `count()` each, in a session whose Python workers are up."""
    from pyspark.sql import functions as F

    spark.read.format("kafka-segments").load(str(src)).count()  # starts the Python workers
    out = []
    for _ in range(runs):
        low, high = MID_WEEK_HOUR
        reader = spark.read.format("kafka-segments").option("fromTime", str(low)).option("toTime", str(high))
        hour, _ = timed(reader.load(str(src)).where(F.col("timestamp").between(low, high)).count)
        whole, _ = timed(spark.read.format("kafka-segments").load(str(src)).count)
        out.append((hour, whole))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".venv" / "numba-cache"))
    os.environ.setdefault("PYSPARK_PYTHON", str(ROOT / ".venv" / "bin" / "python"))
    src = DATA / "set-4gb-8p"
    generate(src, size_spec(4.0, 8))
    warm_page_cache(src)
    from pyspark.sql import functions as F

    import pipelines

    spark = pipelines.get_spark("local[2]")
    mb = dir_bytes(src) / 1e6
    whole = spark.read.format("kafka-segments").load(str(src))
    records = whole.count()  # also starts the session's Python workers
    per_partition = records // 8
    mid = per_partition // 2
    cases = {  # name: (column, low, high), inclusive
        "one hour, mid-week": ("timestamp", *MID_WEEK_HOUR),
        "one hour, the week's last": ("timestamp", START + 167 * HOUR, START + 168 * HOUR - 1),
        "an hour's offsets, mid-log": ("offset", mid, mid + per_partition // 168),
        "one offset": ("offset", mid, mid),
    }
    print(f"{mb:,.0f} MB, {records:,} records; whole-log count {timed(whole.count)[0]:.2f} s")
    for name, (column, low, high) in cases.items():
        option = "Time" if column == "timestamp" else "Offset"
        for attempt in range(args.runs):
            figures = []
            for ranged in (True, False):
                reader = spark.read.format("kafka-segments")
                if ranged:
                    reader = reader.option(f"from{option}", str(low)).option(f"to{option}", str(high))
                df = reader.load(str(src)).where(F.col(column).between(low, high))
                count_s, rows = timed(df.count)
                group_s, _ = timed(lambda df=df: df.groupBy("key").count().collect())
                figures.append((count_s, group_s, rows))
            (on_c, on_g, rows), (off_c, off_g, _) = figures
            print(
                f"{name}, run {attempt + 1}: {rows:,} rows; count {on_c:.2f} s ranged, {off_c:.2f} s not "
                f"({on_c / off_c:.3f}); groupBy(key) {on_g:.2f} s ranged, {off_g:.2f} s not ({on_g / off_g:.3f})"
            )
    spark.stop()


if __name__ == "__main__":
    main()
