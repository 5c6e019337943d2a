"""segpipe on a Spark standalone cluster (a master and two workers, each its own JVM), submitted
with spark-submit as the README shows: the code shipped to the executors as an archive, SRC and
DST on S3 (SeaweedFS) so no executor reads a local path, and the output byte-identical to a
local[2] run — also when a worker dies in the middle of the run."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.runtime.session import driver_java_options
from segment_io.exit_codes import ExitCode
from segment_io.generate import generate_log_dir
from segment_io.generate_spec import default_specs, scaled
from segment_io.storage import open_storage
from tests.cluster.standalone import Cluster
from tests.helpers import kill_group, run_segpipe, spark_submit

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
NOW = 1_700_700_000_000
CONFIG = ["--config", str(ROOT / "conf" / "samples.yaml"), "--now-ms", str(NOW)]
RUN_TIMEOUT_S = 300.0
EXECUTOR_JAVA_OPTIONS = "spark.executor.extraJavaOptions"


def submit(
    cluster: Cluster, archive: Path, executor_python: str, env: dict[str, str], *args: str
) -> subprocess.Popen[str]:
    """`spark-submit` of the segpipe command line, as README "Running on a cluster" has it."""
    executor_env = [f"spark.executorEnv.{k}={v}" for k, v in sorted(env.items()) if k.startswith("AWS_")]
    command = spark_submit(
        "--master",
        cluster.master_url,
        "--archives",
        f"{archive}#segpipe",
        "--conf",
        "spark.executorEnv.PYTHONPATH=segpipe",
        "--conf",
        f"spark.pyspark.python={executor_python}",
        "--conf",
        f"spark.pyspark.driver.python={sys.executable}",
        "--conf",
        "spark.executor.memory=1g",
        "--conf",
        "spark.task.maxFailures=4",
        # The executors' JVMs started as the driver's (spark_submit) and the daemons': short runs,
        # where the optimising compiler's threads cost more than they save (measured: the file's
        # CPU 155 -> 89 s, its time 120 -> 77 s).
        "--conf",
        f"{EXECUTOR_JAVA_OPTIONS}={driver_java_options()}",
        *[item for pair in executor_env for item in ("--conf", pair)],
        str(ROOT / "pipelines" / "cli" / "__main__.py"),
        *args,
    )
    full = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SEGPIPE_FAULT"))}
    full.update(env, PYSPARK_DRIVER_PYTHON=sys.executable)  # how spark-submit finds its Spark
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=full,
        start_new_session=True,
    )


def finish(proc: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    try:
        out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        kill_group(proc.pid)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def tree(url: str) -> dict[str, str]:
    """Every file under `url` (local or S3) with its SHA-256; the run's own metadata left out."""
    storage, root = open_storage(url)
    return {
        f.path[len(root) :].lstrip("/"): hashlib.sha256(storage.read(f.path)).hexdigest()
        for f in storage.walk_files(root)
        if "/_segpipe/" not in f.path and not f.path.endswith(".run.json")
    }


@pytest.fixture(scope="module")
def archive_logs(seaweed_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A log directory of about 20 MB, locally and in the bucket; and a local[2] run's output."""
    local = tmp_path_factory.mktemp("cluster-src") / "logs"
    specs = [scaled(s, records=s.records * 25, segment_bytes=1 << 20) for s in default_specs()]
    storage, path = open_storage(str(local))
    generate_log_dir(storage, path, specs)
    s3, bucket = open_storage("s3://archive")
    s3.makedirs(bucket)
    for f in storage.walk_files(path):
        s3.write_atomic(f"archive/src/{f.path[len(path) :].lstrip('/')}", storage.read(f.path))
    reference = tmp_path_factory.mktemp("cluster-ref") / "out"
    local_run = run_segpipe("clean", str(local), str(reference), *CONFIG, "--master", "local[2]")
    assert local_run.returncode == ExitCode.OK, local_run.stderr
    return {"src": "s3://archive/src", "reference": str(reference)}


def test_clean_submitted_to_the_cluster_matches_a_local_run(
    cluster: Cluster,
    segpipe_archive: Path,
    executor_python: str,
    seaweed_env: dict[str, str],
    archive_logs: dict[str, str],
) -> None:
    started = time.perf_counter()
    proc = finish(
        submit(
            cluster,
            segpipe_archive,
            executor_python,
            seaweed_env,
            "clean",
            archive_logs["src"],
            "s3://archive/cluster-out",
            *CONFIG,
        )
    )
    print(f"cluster clean: {time.perf_counter() - started:.1f} s")
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    expected = tree(archive_logs["reference"])
    assert len(expected) > 20 and tree("s3://archive/cluster-out") == expected
    # Both workers' executors ran tasks, with the shipped code (their Python cannot import an
    # installed segpipe: see the executor_python fixture).
    for index in range(2):
        logs = "".join(p.read_text(errors="replace") for p in cluster.executor_logs(index))
        assert "Running task" in logs, f"worker {index} ran no task"


def test_a_job_survives_a_worker_killed_mid_run(
    cluster: Cluster,
    segpipe_archive: Path,
    executor_python: str,
    seaweed_env: dict[str, str],
    archive_logs: dict[str, str],
    tmp_path: Path,
) -> None:
    configs = (ROOT / "conf" / "samples.yaml").read_text()
    job = tmp_path / "job.yaml"
    job.write_text(
        f"name: cluster\nsource: {archive_logs['src']}\noutput: s3://archive/jobs/{{run}}\n"
        "steps: [retention, compact]\nnow: 2023-11-23T00:40:00Z\nconfigs:\n"
        + "".join(f"  {line}\n" for line in configs.splitlines())
    )
    before = {p: p.stat().st_size for p in cluster.executor_logs(0)}
    proc = submit(cluster, segpipe_archive, executor_python, seaweed_env, "run", str(job), "--run", "r1")
    try:
        # Kill worker 0 (and its executor) once its executor of this application runs tasks.
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while True:
            fresh = [p for p in cluster.executor_logs(0) if p not in before]
            if any("Running task" in p.read_text(errors="replace") for p in fresh):
                break
            assert proc.poll() is None, "the run ended before worker 0's executor ran a task"
            assert time.monotonic() < deadline, "worker 0's executor never ran a task"
            time.sleep(0.1)
        cluster.kill_worker(0)
        done = finish(proc)
    finally:
        kill_group(proc.pid)
    assert done.returncode == ExitCode.OK, done.stderr[-3000:]
    assert "step retention+compact: done" in done.stdout
    assert tree("s3://archive/jobs/r1") == tree(archive_logs["reference"])
    storage, path = open_storage("s3://archive/jobs/r1.run.json")
    state = json.loads(storage.read(path))
    assert state["steps"]["compact"]["state"] == "done" and len(state["steps"]["compact"]["partitions"]) == 4
