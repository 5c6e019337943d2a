"""`segpipe validate` of a cleaned output beside the `clean` that made it: the structure suites,
and the structure suites plus the compaction promise against the source (both whole processes,
local[2]). Targets: on the bundled samples, validate at most 2x the time of its clean; on the
4 GB set, the structure suites at most 1.5x and the promise at most 2.5x.

    .venv/bin/python bench/validate_bench.py [--gb 4] [--partitions 8]
    .venv/bin/python bench/validate_bench.py --samples
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clean_bench import DATA, dir_bytes, generate, run_clean, size_spec, warm_page_cache  # noqa: E402
from measure import run_measured  # noqa: E402


def run_validate(path: Path, against: Path | None, master: str) -> float:
    cmd = [
        str(ROOT / ".venv" / "bin" / "segpipe"),
        "validate",
        str(path),
        "--report",
        str(path.parent / "docs"),
        "--master",
        master,
    ] + (["--against", str(against)] if against else [])
    shutil.rmtree(path.parent / "docs", ignore_errors=True)
    env = dict(os.environ, PYSPARK_PYTHON=str(ROOT / ".venv" / "bin" / "python"), SPARK_LOCAL_IP="127.0.0.1")
    wall, _ = run_measured(cmd, env, "validate")
    return wall


SAMPLES_FLAGS = ["--config", str(ROOT / "conf" / "samples.yaml"), "--now", "2023-11-23"]


def clean_samples(dst: Path, master: str) -> float:
    shutil.rmtree(dst, ignore_errors=True)
    cmd = [
        str(ROOT / ".venv" / "bin" / "segpipe"),
        "clean",
        str(ROOT / "data" / "samples"),
        str(dst),
        *SAMPLES_FLAGS,
        "--master",
        master,
    ]
    env = dict(os.environ, PYSPARK_PYTHON=str(ROOT / ".venv" / "bin" / "python"), SPARK_LOCAL_IP="127.0.0.1")
    wall, _ = run_measured(cmd, env, "clean")
    return wall


def samples(master: str) -> None:
    """The fixed cost: the bundled samples (a few hundred KB), where start-up is most of a run."""
    dst = DATA / "samples-validate" / "out"
    dst.parent.mkdir(parents=True, exist_ok=True)
    clean_s = clean_samples(dst, master)
    structure_s = run_validate(dst, None, master)
    promise_s = run_validate(dst, ROOT / "data" / "samples", master)
    print("bundled samples")
    print(f"  clean                          {clean_s:6.1f} s")
    print(f"  validate (structure)           {structure_s:6.1f} s  = {structure_s / clean_s:.2f}x the clean")
    print(f"  validate --against (promise)   {promise_s:6.1f} s  = {promise_s / clean_s:.2f}x the clean")
    shutil.rmtree(dst.parent, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gb", type=float, default=4.0)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--samples", action="store_true", help="the bundled samples instead of a generated set"
    )
    args = parser.parse_args()
    if args.samples:
        samples(args.master)
        return
    name = f"set-{args.gb:g}gb-{args.partitions}p"
    src, dst = DATA / name, DATA / f"{name}-validate" / "out"
    generate(src, size_spec(args.gb, args.partitions))
    warm_page_cache(src)
    dst.parent.mkdir(parents=True, exist_ok=True)
    clean_s, _, report = run_clean(src, dst, args.master, [])
    structure_s = run_validate(dst, None, args.master)
    promise_s = run_validate(dst, src, args.master)
    mb = dir_bytes(src) / 1e6
    print(
        f"input {mb:,.0f} MB, output {report['bytes_out'] / 1e6:,.0f} MB "
        f"({sum(p['records_out'] for p in report['partitions']):,} records)"
    )
    print(f"  clean                          {clean_s:6.1f} s")
    print(f"  validate (structure)           {structure_s:6.1f} s  = {structure_s / clean_s:.2f}x the clean")
    print(f"  validate --against (promise)   {promise_s:6.1f} s  = {promise_s / clean_s:.2f}x the clean")
    shutil.rmtree(dst.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
