"""Every job end to end on a Spark Connect server (PySpark's own, on 127.0.0.1), its outputs
byte-identical to classic local mode: clean (compaction in one task and through the key
shuffle, and its validation gate with an operator's suite), validate, tier, restore,
clean --in-place, erase, a job file, and the `kafka-segments` source from a Connect session."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelines.config.job import load_job_config
from pipelines.config.tuning import DRIVER_WORK
from pipelines.jobs.clean.in_place import clean_in_place
from pipelines.jobs.clean.request import CleanRequest
from pipelines.jobs.erase.job import erase
from pipelines.jobs.tier.restore import restore
from segment_io.exit_codes import ExitCode
from tests.connect_server import connect_server
from tests.helpers import REPO, clean_in_session, files_of, run_segpipe, sigterm_once_staged

pytestmark = pytest.mark.connect
NOW = "1700700000000"
SAMPLES = ["--config", "conf/samples.yaml", "--now-ms", NOW]
KEEP_ALL = ["--set", "retention.ms=-1", "--now-ms", NOW]


@pytest.fixture(autouse=True)
def spark_does_the_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every stage runs as Spark tasks (small local logs are otherwise scanned, compacted and
    copied in the driver's threads), in the commands and in this process alike."""
    monkeypatch.setenv(DRIVER_WORK.env, "off")


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with connect_server(tmp_path_factory.mktemp("connect") / "server.log") as url:
        yield url


@pytest.fixture(scope="module")
def remote_without_segpipe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server whose Python has every dependency of segpipe but not segpipe."""
    with connect_server(tmp_path_factory.mktemp("connect-bare") / "server.log", without_segpipe=True) as url:
        yield url


def quiet(line: str) -> None:
    del line


def segpipe_ok(*args: str) -> subprocess.CompletedProcess[str]:
    proc = run_segpipe(*args)
    assert proc.returncode == ExitCode.OK, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc


@pytest.mark.parametrize("topics", ["all", "one"], ids=["samples", "one-partition"])
def test_clean_on_connect_equals_classic(
    spark, remote: str, sample_dir: Path, tmp_path: Path, topics: str
) -> None:  # type: ignore[no-untyped-def]
    """The samples' partitions are each compacted inside one task; one partition alone is more
    than a core's share of the run, so it goes through the key shuffle (runtime.dataflow.routed)."""
    src, sets, flags = sample_dir, None, SAMPLES
    if topics == "one":
        src, sets = tmp_path / "src", ["cleanup.policy=compact"]
        shutil.copytree(sample_dir / "orders-0", src / "orders-0")
        flags = ["--set", sets[0], "--now-ms", NOW]
    clean_in_session(spark, src, tmp_path / "classic", int(NOW), sets)
    proc = segpipe_ok(
        "clean",
        str(src),
        str(tmp_path / "connect"),
        *flags,
        "--spark-remote",
        remote,
        "--validate",
        "--suite",
        "conf/suites/orders.json",
    )
    assert "validation passed" in proc.stdout + proc.stderr
    assert files_of(tmp_path / "connect") == files_of(tmp_path / "classic")
    assert len(files_of(tmp_path / "classic")) > 4


def test_validate_on_connect_passes_and_fails(spark, remote: str, sample_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    clean_in_session(spark, sample_dir, out, int(NOW))
    check = [
        "--against",
        str(sample_dir),
        *SAMPLES,
        "--suite",
        "conf/suites/orders.json",
        "--spark-remote",
        remote,
    ]
    segpipe_ok("validate", str(out), *check)
    log = next(p for p in sorted((out / "orders-0").glob("*.log")) if p.stat().st_size > 0)
    data = bytearray(log.read_bytes())
    data[-1] ^= 0xFF
    log.write_bytes(bytes(data))
    broken = run_segpipe("validate", str(out), *check)
    assert broken.returncode == ExitCode.INVALID, broken.stderr[-2000:]
    assert "CRC" in broken.stdout + broken.stderr and "validation passed" not in broken.stdout + broken.stderr


def test_tier_restore_and_in_place_clean_on_connect(
    spark, remote: str, sample_dir: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    log, tier = tmp_path / "log", tmp_path / "tier"
    shutil.copytree(sample_dir, log)
    segpipe_ok("tier", str(log), str(tier), *KEEP_ALL, "--spark-remote", remote)
    segpipe_ok(
        "restore", str(tier), str(tmp_path / "restored"), "--local", str(log), "--spark-remote", remote
    )
    assert files_of(tmp_path / "restored") == files_of(sample_dir)

    # Cleaned in the bucket, then restored: what the same clean on classic Spark leaves.
    shutil.copytree(tier, tmp_path / "tier-classic")
    segpipe_ok("clean", str(tier), "--in-place", *SAMPLES, "--spark-remote", remote)
    segpipe_ok("restore", str(tier), str(tmp_path / "after"), "--spark-remote", remote)
    samples = load_job_config(str(REPO / "conf" / "samples.yaml"))
    clean_in_place(
        spark, CleanRequest(src=str(tmp_path / "tier-classic"), config=samples, now_ms=int(NOW)), quiet
    )
    restore(spark, str(tmp_path / "tier-classic"), str(tmp_path / "classic"), log=quiet)
    assert files_of(tmp_path / "after") == files_of(tmp_path / "classic")
    assert files_of(tmp_path / "after") != files_of(tmp_path / "restored")  # the clean changed it


def classic_run(spark, job_path: Path, run: str) -> None:  # type: ignore[no-untyped-def]
    """The steps `segpipe run JOB --run RUN` runs, in this process on the classic session (a
    command of its own would start a JVM of its own for the same bytes)."""
    from pipelines.config.jobfile import load_job_file
    from pipelines.run.runner import chosen_units, run_units
    from pipelines.run.state import open_state

    job = load_job_file(str(job_path)).for_run(run)
    assert job.now_ms is not None
    state = open_state(job.state, job.name, job.digest, run, job.now_ms)
    run_units(spark, job, state, chosen_units(job, state, None), quiet)


def test_a_job_file_runs_on_connect(spark, remote: str, sample_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    samples = (REPO / "conf" / "samples.yaml").read_text()
    for name in ("classic", "connect"):
        (tmp_path / f"{name}.yaml").write_text(
            f"name: {name}\nsource: {sample_dir}\noutput: {tmp_path}/{name}/{{run}}\n"
            f"remote: {tmp_path}/{name}-remote/{{run}}\nsteps: [retention, compact, validate, tier]\n"
            f"now: {NOW}\nspark: {{master: 'local[2]'}}\nconfigs:\n"
            + "".join(f"  {line}\n" for line in samples.splitlines())
        )
    classic_run(spark, tmp_path / "classic.yaml", "r1")
    segpipe_ok("run", str(tmp_path / "connect.yaml"), "--run", "r1", "--spark-remote", remote)
    assert files_of(tmp_path / "connect" / "r1") == files_of(tmp_path / "classic" / "r1")
    state = json.loads((tmp_path / "connect" / "r1.run.json").read_text())
    assert state["steps"]["tier"]["state"] == "done" and state["steps"]["tier"]["segments_uploaded"] > 0


DATA_SOURCE = """
import json, sys
from pipelines import get_spark
spark = get_spark(remote=sys.argv[1])
df = spark.read.format("kafka-segments").load(sys.argv[2])
rows = df.groupBy("topic", "partition").agg({"offset": "sum", "*": "count"}).collect()
print(json.dumps(sorted([r[0], r[1], r[2], r[3]] for r in rows)))
"""


def test_the_data_source_on_connect(spark, remote: str, sample_dir: Path) -> None:  # type: ignore[no-untyped-def]
    proc = subprocess.run(
        [sys.executable, "-c", DATA_SOURCE, remote, str(sample_dir)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    df = spark.read.format("kafka-segments").load(str(sample_dir))
    rows = df.groupBy("topic", "partition").agg({"offset": "sum", "*": "count"}).collect()
    assert json.loads(proc.stdout.splitlines()[-1]) == sorted([r[0], r[1], r[2], r[3]] for r in rows)


PRELOADED = """
import json, os, sys
from pyspark.sql import SparkSession

def loaded(batches):
    import pyarrow as pa
    for _ in batches:
        pass
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as handle:
        parent = handle.read().replace(b"\\0", b" ").decode()
    yield pa.RecordBatch.from_pylist([{"modules": sorted(m for m in sys.modules if m.startswith("pipelines.")),
                                       "parent": parent}])

spark = SparkSession.builder.remote(sys.argv[1]).create()
row = spark.range(1).mapInArrow(loaded, "modules array<string>, parent string").collect()[0]
print(json.dumps({"modules": row["modules"], "parent": row["parent"]}))
"""


def test_a_server_with_segpipe_forks_its_workers_with_every_jobs_modules_loaded(remote: str) -> None:
    """The server's workers fork from segpipe's worker daemon, the jobs' modules already imported
    (README: Spark Connect): a plain session's task, which imports nothing of segpipe, finds them."""
    from tests.connect_server import server_preload

    proc = subprocess.run(
        [sys.executable, "-c", PRELOADED, remote], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    found = json.loads(proc.stdout.splitlines()[-1])
    assert "-m pipelines.runtime.worker_daemon" in found["parent"], found["parent"]
    assert set(server_preload()) <= set(found["modules"]), found["modules"]


def test_sigterm_stops_a_connect_run_and_publishes_nothing(
    remote: str, sample_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    proc = sigterm_once_staged(
        "clean", str(sample_dir), str(out), *SAMPLES, "--spark-remote", remote, where=tmp_path
    )
    err = proc.stderr
    assert proc.returncode == ExitCode.TERMINATED, err
    assert err.strip().splitlines()[-1] == "segpipe: terminated; nothing was published", err
    assert not out.exists()


def test_a_setting_the_server_fixed_at_its_start_is_refused(
    remote: str, sample_dir: Path, tmp_path: Path
) -> None:
    proc = run_segpipe(
        "clean",
        str(sample_dir),
        str(tmp_path / "out"),
        *SAMPLES,
        "--spark-remote",
        remote,
        "--conf",
        "spark.executor.memory=2g",
    )
    assert proc.returncode == ExitCode.REFUSED, proc.stderr[-2000:]
    assert "--conf spark.executor.memory: the Spark Connect server does not take it" in proc.stderr
    assert not (tmp_path / "out").exists()
    both = run_segpipe(
        "clean", str(sample_dir), str(tmp_path / "out"), "--master", "local[1]", "--spark-remote", remote
    )
    assert both.returncode == ExitCode.REFUSED and "--master and --spark-remote" in both.stderr, both.stderr[
        -2000:
    ]


def test_erase_on_connect_equals_classic(spark, remote: str, sample_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """erase (its segments as Spark tasks, and its proof gating publication) from a Connect
    session: the same bytes as on classic local[2] (this process's session)."""
    (tmp_path / "keys.txt").write_text("k0000000001\nk0000000004\n")
    flags = ["--keys", str(tmp_path / "keys.txt"), "--topic", "orders", "--topic", "clicks", "--validate"]
    keys = str(tmp_path / "keys.txt")
    erase(
        spark,
        str(sample_dir),
        str(tmp_path / "classic"),
        keys,
        quiet,
        topics=lambda t: t in {"orders", "clicks"},
    )
    proc = segpipe_ok("erase", str(sample_dir), str(tmp_path / "connect"), *flags, "--spark-remote", remote)
    assert "erasure proved" in proc.stdout
    assert files_of(tmp_path / "connect") == files_of(tmp_path / "classic")
    assert len(files_of(tmp_path / "classic")) > 4


SHIPPED = """
import json, sys
from pyspark.sql import SparkSession

def where(batches):
    import pyarrow as pa
    try:
        import pipelines
        found = pipelines.__file__
    except ModuleNotFoundError as exc:
        found = "missing: " + str(exc.name)
    for _ in batches:
        pass
    yield pa.RecordBatch.from_pylist([{"found": found}])

raw = SparkSession.builder.remote(sys.argv[1]).create()
before = raw.range(1).mapInArrow(where, "found string").collect()[0]["found"]
raw.stop()
from pipelines.errors import ConfigError
from pipelines.runtime.connect import connect
from pipelines.runtime.connect_artifacts import check_workers

spark = connect(sys.argv[1], "shipped", {})
check_workers(spark, ["pipelines.log.scan"])  # what a job does before its first task
after = spark.range(1).mapInArrow(where, "found string").collect()[0]["found"]
try:
    check_workers(spark, ["pipelines.log.scan", "segpipe_no_such_dependency"])
    refused = None
except ConfigError as exc:
    refused = str(exc)
print(json.dumps({"before": before, "after": after, "refused": refused}))
"""


def test_a_server_without_segpipe_runs_the_one_the_client_sends(
    spark, remote_without_segpipe: str, sample_dir: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """The server's workers cannot import segpipe: a plain Connect session's task finds no
    `pipelines`, a segpipe session's task finds the client's own; a module the server's Python
    lacks is named before any work; an erase there writes what classic local mode writes."""
    remote = remote_without_segpipe
    proc = subprocess.run(
        [sys.executable, "-c", SHIPPED, remote], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    found = json.loads(proc.stdout.splitlines()[-1])
    assert found["before"] == "missing: pipelines"
    assert found["after"].endswith("pipelines/__init__.py") and not found["after"].startswith(str(REPO))
    assert ".zip" in found["after"] or "artifacts" in found["after"], found["after"]
    assert "cannot import segpipe_no_such_dependency" in found["refused"]
    assert "pipelines" not in found["refused"].split(":")[0]
    (tmp_path / "keys.txt").write_text("k0000000001\nk0000000004\n")
    keys, classic = str(tmp_path / "keys.txt"), str(tmp_path / "classic")
    erase(spark, str(sample_dir), classic, keys, quiet, topics=lambda t: t == "orders")
    flags = ["--keys", str(tmp_path / "keys.txt"), "--topic", "orders", "--validate"]
    segpipe_ok("erase", str(sample_dir), str(tmp_path / "connect"), *flags, "--spark-remote", remote)
    assert files_of(tmp_path / "connect") == files_of(tmp_path / "classic")
