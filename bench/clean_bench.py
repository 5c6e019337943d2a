"""`segpipe clean` end to end: whole process (Spark start included) and steady state, with peak
memory of the driver, the JVM and the Python workers.

Data (written once under bench/data/, reused): 8 partitions of a compacted topic, values of
300–1500 bytes, codecs none/lz4/zstd/snappy mixed per batch, Zipf-skewed keys so most records
are superseded. `--keys-run` instead writes one partition of N distinct keys with small values
(the key-count test: memory must stay bounded).

    .venv/bin/python bench/clean_bench.py                 # 4 GB set, 8 partitions
    .venv/bin/python bench/clean_bench.py --keys-run 50000000
    .venv/bin/python bench/clean_bench.py --operator-cases  # retention only vs cp, --link, 2nd pass
    .venv/bin/python bench/clean_bench.py --connect --steady-runs 3  # on a Spark Connect server
    .venv/bin/python bench/clean_bench.py --erase-keys 100000  # erase vs clean of the same set
    .venv/bin/python bench/clean_bench.py --erase-keys 20000000  # a list over 32 MiB: joined
    .venv/bin/python bench/clean_bench.py --targets  # every speed target of the clean path, one run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from measure import Peaks, run_measured  # noqa: E402

from segment_io.generate import generate_partition, write_root_checkpoints  # noqa: E402
from segment_io.generate_spec import TopicSpec  # noqa: E402
from segment_io.storage import open_storage  # noqa: E402
from segment_io.topic_partition import TopicPartition  # noqa: E402

NOW_MS = 1_800_000_000_000
DATA = ROOT / "bench" / "data"
CONFIG_SETS = ["cleanup.policy=compact", "segpipe.last.segment.sealed=true"]


def size_spec(gb: float, partitions: int) -> TopicSpec:
    """Records per partition chosen so the on-disk set is about `gb` GB (measured: ~430 on-disk bytes per record)."""
    per_partition = int(gb * 1e9 / partitions / 430)
    return TopicSpec(
        "events",
        partitions=partitions,
        records=per_partition,
        keys=max(1000, per_partition // 50),
        key_skew=1.1,
        value_min=300,
        value_max=1500,
        records_per_batch=(20, 60),
        tombstone_ratio=0.01,
        header_ratio=0.1,
        codecs=("none", "lz4", "zstd", "snappy"),
        transactional_ratio=0.0,
        open_transaction=False,
        idempotent_ratio=0.5,
        segment_bytes=128 * 1024 * 1024,
        span_ms=7 * 24 * 3600 * 1000,
        start_ms=NOW_MS - 8 * 24 * 3600 * 1000,
    )


def keys_spec(keys: int) -> TopicSpec:
    """One partition where every record has its own key (nothing superseded), small values."""
    return TopicSpec(
        "keys",
        partitions=1,
        records=keys,
        keys=keys,
        key_skew=0.0,
        distinct_keys=True,
        value_min=8,
        value_max=24,
        records_per_batch=(400, 600),
        tombstone_ratio=0.0,
        header_ratio=0.0,
        codecs=("lz4", "zstd"),
        transactional_ratio=0.0,
        open_transaction=False,
        idempotent_ratio=0.0,
        segment_bytes=256 * 1024 * 1024,
        span_ms=3600 * 1000,
        start_ms=NOW_MS - 2 * 3600 * 1000,
    )


def _generate_one(args: tuple[str, TopicSpec, int]) -> tuple[TopicPartition, int]:
    root, spec, partition = args
    storage, path = open_storage(root)
    tp = TopicPartition(spec.name, partition)
    return tp, generate_partition(storage, path, tp, spec, seed=11)


def generate(root: Path, spec: TopicSpec) -> None:
    if (root / "_complete").exists():
        return
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=2) as pool:
        ends = dict(pool.map(_generate_one, [(str(root), spec, p) for p in range(spec.partitions)]))
    storage, path = open_storage(str(root))
    write_root_checkpoints(storage, path, ends)
    (root / "_complete").write_text(json.dumps({str(k): v for k, v in ends.items()}))
    print(f"generated {dir_bytes(root) / 1e9:.2f} GB in {time.perf_counter() - t0:.0f} s at {root}")


def warm_page_cache(root: Path) -> None:
    """Read every file once: figures are taken with the input in the page cache, as the
    baseline's were (a run right after other I/O would otherwise measure the disk)."""
    for path in root.rglob("*"):
        if path.is_file():
            with path.open("rb") as f:
                while f.read(16 << 20):
                    pass


def dir_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*.log"))


def run_clean(
    src: Path,
    dst: Path,
    master: str | None,
    extra: list[str],
    flags: tuple[str, ...] = (),
    sets: list[str] = CONFIG_SETS,
) -> tuple[float, Peaks, dict]:  # type: ignore[type-arg]
    """The command line's clean (on `master`, or where `flags` say: --spark-remote), with the
    topic configs `sets` (the compacted set's) and `extra`."""
    shutil.rmtree(dst, ignore_errors=True)
    cmd = [
        str(ROOT / ".venv" / "bin" / "segpipe"),
        "clean",
        str(src),
        str(dst),
        "--now-ms",
        str(NOW_MS),
        *(["--master", master] if master else []),
        *flags,
    ]
    for s in sets + extra:
        cmd += ["--set", s]
    env = dict(os.environ, PYSPARK_PYTHON=str(ROOT / ".venv" / "bin" / "python"), SPARK_LOCAL_IP="127.0.0.1")
    wall, peaks = run_measured(cmd, env, "clean")
    report = json.loads((dst / "_segpipe" / "report.json").read_text())
    return wall, peaks, report


def steady_state(src: Path, dst: Path, master: str, extra: list[str], runs: int) -> list[tuple[float, dict]]:  # type: ignore[type-arg]
    """Runs in one started session, the figures once Spark is up: a first run, which also starts
    the session's Python workers, then `runs` timed ones. Returns (seconds, seconds by stage) per
    run, the first run's first."""
    from pipelines.config import JobConfig
    from pipelines.jobs.clean import clean
    from pipelines.runtime.session import get_spark

    os.environ.setdefault("PYSPARK_PYTHON", str(ROOT / ".venv" / "bin" / "python"))
    spark = get_spark(master)
    config = JobConfig.from_sources(None, CONFIG_SETS + extra)
    out = []
    for _ in range(1 + runs):
        shutil.rmtree(dst, ignore_errors=True)
        t0 = time.perf_counter()
        report = clean(spark, str(src), str(dst), config, now_ms=NOW_MS, log=lambda *_: None)
        out.append((time.perf_counter() - t0, report.seconds_by_stage))
    spark.stop()
    return out


def _stages(seconds: dict[str, float]) -> str:
    return "stages: " + ", ".join(f"{k} {v:.1f} s" for k, v in seconds.items())


# Retention only, about half the segments deleted by size (the operators' most common run).
RETENTION_ONLY = ["cleanup.policy=delete", "retention.ms=-1", "retention.bytes=250000000"]
SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")


def cp_kept(src: Path, dst: Path, target: Path, sync: bool = False) -> float:
    """`cp` of the segment files a run kept (its natural baseline), one cp per partition; with
    `sync`, then flushed to disk (segpipe fsyncs what it publishes)."""
    shutil.rmtree(target, ignore_errors=True)
    started = time.perf_counter()
    for part in sorted(p for p in dst.iterdir() if p.is_dir() and p.name != "_segpipe"):
        files = [
            str(src / part.name / f.name) for f in sorted(part.iterdir()) if f.name.endswith(SEGMENT_SUFFIXES)
        ]
        (target / part.name).mkdir(parents=True)
        subprocess.run(["cp", *files, str(target / part.name)], check=True)
    if sync:
        subprocess.run(["sync", "-f", str(target)], check=True)
    return time.perf_counter() - started


def operator_cases(src: Path, master: str) -> None:
    """The runs operators make most: retention only (against cp of what it keeps, and with
    --link), a second pass over a compacted output (nothing to do), a compaction pass."""
    out, out2, copy = DATA / "out-retention", DATA / "out-second", DATA / "out-cp"
    for attempt in range(2):
        wall, _, report = run_clean(src, out, master, RETENTION_ONLY)
        cp_s = cp_kept(src, out, copy)
        cp_sync_s = cp_kept(src, out, copy, sync=True)  # durable, as segpipe's copies are
        mb = sum(p["bytes_out"] for p in report["partitions"]) / 1e6
        print(
            f"retention only, run {attempt + 1}: {wall:.1f} s whole process ({mb:,.0f} MB kept); cp of the kept "
            f"files {cp_s:.1f} s; segpipe at {cp_s / wall:.2f}x cp's speed (target >= 0.8); cp + sync "
            f"{cp_sync_s:.1f} s ({cp_sync_s / wall:.2f}x); {_stages(report['seconds_by_stage'])}"
        )
        wall, _, report = run_clean(src, out, master, RETENTION_ONLY, ("--link",))
        print(
            f"retention only with --link, run {attempt + 1}: {wall:.1f} s whole process (target <= 1 s); "
            f"{_stages(report['seconds_by_stage'])}"
        )
    shutil.rmtree(copy, ignore_errors=True)
    wall, _, report = run_clean(src, out, master, [])
    print(f"compaction pass: {wall:.1f} s whole process; {_stages(report['seconds_by_stage'])}")
    for attempt in range(2):
        wall, _, report = run_clean(out, out2, master, [])
        print(
            f"second pass over the compacted output, run {attempt + 1}: {wall:.1f} s whole process "
            f"(target <= 3 s); {_stages(report['seconds_by_stage'])}"
        )
        wall, _, report = run_clean(out, out2, master, [], ("--select", "kafka"))
        print(f"  the same with --select kafka: {wall:.1f} s; {_stages(report['seconds_by_stage'])}")
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(out2, ignore_errors=True)


def connect_cases(src: Path, dst: Path, runs: int) -> tuple[list[float], list[float]]:
    """Whole-process runs against one Spark Connect server (started once, as a Connect user's
    server runs), then as many classic local[2] runs; every run printed. Returns the seconds of
    each (Connect's, classic's)."""
    from tests.connect_server import connect_server

    mb = dir_bytes(src) / 1e6
    with connect_server() as url:
        connect = [run_clean(src, dst, None, [], ("--spark-remote", url)) for _ in range(runs)]
    classic = [run_clean(src, dst, "local[2]", []) for _ in range(runs)]
    for name, results in (("Spark Connect", connect), ("classic local[2]", classic)):
        print(
            f"{name}: "
            + ", ".join(f"{wall:.1f} s ({_stages(r['seconds_by_stage'])})" for wall, _, r in results)
        )
    ratio = sorted(w for w, _, _ in connect)[runs // 2] / sorted(w for w, _, _ in classic)[runs // 2]
    print(f"{mb:,.0f} MB: Spark Connect / classic (medians, whole process) = {ratio:.2f}")
    return [w for w, _, _ in connect], [w for w, _, _ in classic]


# (case, GB, partitions, target in seconds, whole process on 2 cores): what a clean must reach.
CLEAN_TARGETS = (("4 GB in 8 partitions", 4.0, 8, 4.8), ("one 2 GB partition", 2.0, 1, 3.8))
CONNECT_TARGET = 1.15  # a Connect run's time over classic local mode's, second runs of both
PUSHDOWN_TARGET = 0.10  # one mid-week hour's read over the whole set's


def target_cases(master: str, runs: int) -> None:
    """Every speed target of the clean path measured in one run, each beside its target: the
    clean of the 4 GB set and of one 2 GB partition (whole process), Spark Connect against
    classic local mode (second runs), one hour through the `kafka-segments` source against the
    whole read."""
    from pushdown_bench import hour_against_whole

    import pipelines

    os.environ.setdefault("PYSPARK_PYTHON", str(ROOT / ".venv" / "bin" / "python"))
    lines = []
    for name, gb, partitions, target in CLEAN_TARGETS:
        src = DATA / f"set-{gb:g}gb-{partitions}p"
        generate(src, size_spec(gb, partitions))
        warm_page_cache(src)
        walls = [run_clean(src, Path(f"{src}-out"), master, [])[0] for _ in range(runs)]
        shutil.rmtree(f"{src}-out", ignore_errors=True)
        lines.append(_against(f"clean, {name}", walls, target, "s"))
    src = DATA / "set-4gb-8p"
    connect, classic = connect_cases(src, Path(f"{src}-out"), max(2, runs))
    shutil.rmtree(f"{src}-out", ignore_errors=True)
    ratio = connect[1] / classic[1]
    lines.append(
        f"Spark Connect / classic, second runs: {connect[1]:.1f} / {classic[1]:.1f} s = "
        f"{ratio:.2f} (target <= {CONNECT_TARGET:.2f}: {_met(ratio <= CONNECT_TARGET)})"
    )
    spark = pipelines.get_spark("local[2]")
    try:
        reads = hour_against_whole(spark, src, runs)
    finally:
        spark.stop()
    ratios = [hour / whole for hour, whole in reads]
    figures = ", ".join(f"{h:.2f} / {w:.2f} s" for h, w in reads)
    lines.append(_against(f"one mid-week hour / whole read ({figures})", ratios, PUSHDOWN_TARGET, ""))
    print("\n".join(["targets:", *(f"  {line}" for line in lines)]))


def _against(name: str, figures: list[float], target: float, unit: str) -> str:
    shown = ", ".join(f"{f:.3g}{unit and ' ' + unit}" for f in figures)
    return f"{name}: {shown} (target <= {target:g}{unit and ' ' + unit}: {_met(min(figures) <= target)})"


def _met(met: bool) -> str:
    return "met" if met else "not met"


# Which listed keys the set holds (ids ranked by frequency, Zipf 1.1 over ~23k keys a partition):
# "rare", customers with a few dozen records each (~34k records, about one batch in seven touched);
# "frequent", 5 % of all records, in nearly every batch (the erase re-encodes nearly the whole set).
ERASE_CASES = {"rare": range(15000, 16000), "frequent": range(1000, 2000)}


def erase_case(src: Path, dst: Path, master: str, listed: int, runs: int, joined: bool) -> None:
    """`segpipe erase` of `listed` keys (1,000 of them present in the set, rare or frequent ones;
    the rest absent) beside `clean` of the same set, whole process, each run printed. A list over
    32 MiB is joined with the records' keys; `joined` makes every list so."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipelines.config.tuning import KEY_BROADCAST

    mb = dir_bytes(src) / 1e6
    env = dict(os.environ, PYSPARK_PYTHON=str(ROOT / ".venv" / "bin" / "python"), SPARK_LOCAL_IP="127.0.0.1")
    if joined:
        env[KEY_BROADCAST.env] = "0"
    for attempt in range(runs):
        for case, present in ERASE_CASES.items():
            keys = [f"k{i:010d}".encode() for i in present]
            keys += [f"absent-{i:09d}".encode() for i in range(listed - len(keys))]
            listing = DATA / f"erase-{listed}.parquet"
            pq.write_table(pa.table({"key": pa.array(keys, pa.binary())}), listing)
            shutil.rmtree(dst, ignore_errors=True)
            cmd = [
                str(ROOT / ".venv" / "bin" / "segpipe"),
                "erase",
                str(src),
                str(dst),
                "--keys",
                str(listing),
                "--master",
                master,
            ]
            wall, peaks = run_measured(cmd, env, "erase")
            report = json.loads((dst / "_segpipe" / "report.json").read_text())
            rewritten = sum(p["segments_rewritten"] for p in report["partitions"])
            how = "joined" if report["not_found"] is None else "read whole"
            print(
                f"erase of {listed:,} keys ({case}, {how}), run {attempt + 1}: {wall:.1f} s whole process, "
                f"{mb / wall:.0f} MB/s; {report['records_erased']:,} records erased, {rewritten} segments "
                f"rewritten; peak {peaks.total / 2**30:.2f} GiB; {_stages(report['seconds_by_stage'])}"
            )
            # The same erase as a dry run: every record decoded and matched, nothing written.
            shutil.rmtree(dst, ignore_errors=True)
            dry = dst.with_name(dst.name + ".dry.json")
            dry.unlink(missing_ok=True)
            wall, _ = run_measured([*cmd, "--dry-run", "--report", str(dry)], env, "erase")
            print(
                f"  its dry run (decoded and matched, nothing written): {wall:.1f} s whole process; "
                f"{_stages(json.loads(dry.read_text())['seconds_by_stage'])}"
            )
            dry.unlink()
            listing.unlink()
        wall, _, report = run_clean(src, dst, master, [])
        print(
            f"clean of the same set, run {attempt + 1}: {wall:.1f} s whole process; "
            f"{_stages(report['seconds_by_stage'])}; {report['bytes_out'] / 1e6:,.0f} MB written"
        )
        # What writing the whole set durably costs here: a retention-only clean copies every byte.
        wall, _, report = run_clean(src, dst, master, [], sets=["segpipe.last.segment.sealed=true"])
        print(
            f"retention-only clean (every byte copied and fsynced), run {attempt + 1}: {wall:.1f} s "
            f"whole process; {_stages(report['seconds_by_stage'])}"
        )
    shutil.rmtree(dst, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gb", type=float, default=4.0)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--keys-run", type=int, help="one partition with this many distinct keys instead")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--no-steady", action="store_true")
    parser.add_argument("--steady-runs", type=int, default=3)
    parser.add_argument(
        "--connect",
        action="store_true",
        help="whole-process runs on a Spark Connect server (PySpark's own, local[2]) beside classic ones",
    )
    parser.add_argument(
        "--operator-cases",
        action="store_true",
        help="retention only vs cp, --link, a second pass, compaction",
    )
    parser.add_argument(
        "--targets", action="store_true", help="every speed target of the clean path in one run"
    )
    parser.add_argument("--erase-keys", type=int, help="erase this many listed keys, beside a clean")
    parser.add_argument(
        "--joined", action="store_true", help="with --erase-keys: join the list, whatever its size"
    )
    args = parser.parse_args()
    os.environ.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".venv" / "numba-cache"))
    if args.targets:
        target_cases(args.master, 2)
        return
    if args.keys_run:
        spec, name = keys_spec(args.keys_run), f"keys-{args.keys_run}"
    else:
        spec, name = size_spec(args.gb, args.partitions), f"set-{args.gb:g}gb-{args.partitions}p"
    src, dst = DATA / name, DATA / f"{name}-out"
    generate(src, spec)
    warm_page_cache(src)
    if args.operator_cases:
        operator_cases(src, args.master)
        return
    if args.connect:
        connect_cases(src, dst, args.steady_runs)
        return
    if args.erase_keys:
        erase_case(src, dst, args.master, args.erase_keys, args.steady_runs, args.joined)
        return
    size = dir_bytes(src)
    mb = size / 1e6
    wall, peaks, report = run_clean(src, dst, args.master, [])
    inner = report["seconds_total"]
    print(
        f"input {mb:,.0f} MB in {sum(p['segments_in'] for p in report['partitions'])} segments, "
        f"{report['bytes_out'] / 1e6:,.0f} MB out, records {sum(p['records_in'] for p in report['partitions']):,} -> "
        f"{sum(p['records_out'] for p in report['partitions']):,}"
    )
    print(f"whole process ({args.master}): {wall:.1f} s, {mb / wall:.0f} MB/s")
    print(
        f"  inside the session: {inner:.1f} s, {mb / inner:.0f} MB/s; {_stages(report['seconds_by_stage'])}"
    )
    print(
        "  peak RSS: "
        + ", ".join(f"{k} {v / 2**30:.2f} GiB" for k, v in sorted(peaks.rss.items()))
        + f"; all together {peaks.total / 2**30:.2f} GiB, of which anonymous (not mapped segment "
        f"files) {peaks.anon / 2**30:.2f} GiB"
    )
    if not args.no_steady:
        (first, first_stages), *runs = steady_state(src, dst, args.master, [], args.steady_runs)
        times = sorted(t for t, _ in runs)
        print(
            f"first run in a new session (starts its Python workers): {first:.1f} s, {mb / first:.0f} MB/s; "
            + _stages(first_stages)
        )
        print(
            f"steady state (session and workers up, {len(runs)} runs): best {mb / times[0]:.0f} MB/s, "
            f"median {mb / times[len(times) // 2]:.0f} MB/s"
        )
        for t, stages in runs:
            print(f"  {t:.1f} s: {_stages(stages)}")
    shutil.rmtree(dst, ignore_errors=True)


if __name__ == "__main__":
    main()
