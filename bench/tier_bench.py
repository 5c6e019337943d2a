"""`segpipe tier` against real S3 endpoints on this machine, beside a plain s3fs upload of the
same files to the same store in the same run: MB/s of the upload stage (every object read back
and checked) and of the whole process, against s3fs's `put`, and the peak memory of the run; then
a run that releases every local copy (`local.retention.ms=0`), whose release stage proves each
copy first (the committed version read back, the local `.log`'s CRC-32C against the remote one).

Data: 4 partitions (about 2 GB of segments) of the clean benchmark's set, hard-linked under
bench/data/tier-2gb (generated first if missing). Stores: SeaweedFS (a real object store) and
moto's server.

    .venv/bin/python bench/tier_bench.py [--store seaweedfs|moto|both] [--partitions 4]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clean_bench import DATA, generate, size_spec  # noqa: E402
from measure import Peaks, run_measured  # noqa: E402

from tests.s3.stores import moto_server, seaweedfs  # noqa: E402

MB = 1024 * 1024
NOW_MS = 1_800_000_000_000


def subset(partitions: int) -> Path:
    """`partitions` partitions of the 4 GB set, hard-linked (nothing copied)."""
    full = DATA / "set-4gb-8p"
    generate(full, size_spec(4.0, 8))
    out = DATA / f"tier-{partitions}p"
    if not (out / "_complete").exists():
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        for p in range(partitions):
            shutil.copytree(full / f"events-{p}", out / f"events-{p}", copy_function=os.link)
        (out / "_complete").write_text("")
    return out


def files_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and p.name != "_complete")


def plain_put(endpoint: str, src: Path, bucket: str) -> float:
    """Seconds for s3fs's own recursive put of every file of `src` (no read-back)."""
    import s3fs

    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint}, skip_instance_cache=True)
    t0 = time.perf_counter()
    fs.put(str(src) + "/", f"{bucket}/plain/", recursive=True)
    return time.perf_counter() - t0


def run_tier(endpoint: str, src: Path, remote: str, report: Path, *extra: str) -> tuple[float, Peaks, dict]:  # type: ignore[type-arg]
    env = dict(
        os.environ,
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        PYSPARK_PYTHON=str(ROOT / ".venv" / "bin" / "python"),
        SPARK_LOCAL_IP="127.0.0.1",
    )
    cmd = [
        str(ROOT / ".venv" / "bin" / "segpipe"),
        "tier",
        str(src),
        remote,
        "--set",
        "retention.ms=-1",
        "--set",
        "segpipe.last.segment.sealed=true",
        "--now-ms",
        str(NOW_MS),
        "--report",
        str(report),
        "--master",
        "local[2]",
        *extra,
    ]
    wall, peaks = run_measured(cmd, env, "tier")
    return wall, peaks, json.loads(report.read_text())


def bench_store(name: str, endpoint: str, src: Path, work: Path) -> None:
    import s3fs

    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_ENDPOINT_URL=endpoint)
    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint}, skip_instance_cache=True)
    bucket = "bench-tier"
    fs.mkdir(bucket)
    time.sleep(2)  # a new SeaweedFS bucket takes writes a moment after it is made
    size = files_bytes(src)
    put_s = plain_put(endpoint, src, bucket)
    wall, peaks, report = run_tier(endpoint, src, f"s3://{bucket}/tier", work / f"report-{name}.json")
    upload_s = report["seconds_by_stage"]["upload"]
    put_mbs, upload_mbs = size / MB / put_s, report["bytes_uploaded"] / MB / upload_s
    print(f"{name}: {size / 1e9:.2f} GB in {report['segments_uploaded']} segments")
    print(f"  s3fs put (no read-back)          {put_s:6.1f} s  {put_mbs:7.1f} MB/s")
    print(
        f"  tier upload stage (read back)    {upload_s:6.1f} s  {upload_mbs:7.1f} MB/s  "
        f"= {upload_mbs / put_mbs:.2f}x of s3fs put"
    )
    print(
        f"  tier whole process               {wall:6.1f} s  {size / MB / wall:7.1f} MB/s  "
        f"(stages: {', '.join(f'{k} {v:.1f}' for k, v in report['seconds_by_stage'].items())})"
    )
    kinds = ", ".join(f"{k} {v / MB:,.0f} MB" for k, v in sorted(peaks.rss.items()))
    print(
        f"  peak memory: {kinds}; process tree {peaks.total / MB:,.0f} MB (anonymous {peaks.anon / MB:,.0f} MB)"
    )
    # The same log tiered again with every local copy released: a hard-linked copy (the set stays).
    released = work / f"release-{name}"
    shutil.copytree(src, released, copy_function=os.link)
    wall, _, report = run_tier(
        endpoint,
        released,
        f"s3://{bucket}/released",
        work / f"release-{name}.json",
        "--set",
        "local.retention.ms=0",
    )
    stages = report["seconds_by_stage"]
    freed = report["local_bytes_removed"]
    print(
        f"  tier + release of every copy     {wall:6.1f} s  release stage {stages['release']:.1f} s "
        f"({freed / MB / max(stages['release'], 1e-9):,.0f} MB/s proven and removed)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", choices=["seaweedfs", "moto", "both"], default="both")
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    src = subset(args.partitions)
    work = DATA / "tier-work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    if args.store in ("seaweedfs", "both"):
        with seaweedfs() as endpoint:
            bench_store("seaweedfs", endpoint, src, work)
    if args.store in ("moto", "both"):
        with moto_server() as endpoint:
            bench_store("moto", endpoint, src, work)


if __name__ == "__main__":
    main()
