"""The DAGs in dags/: every one imports; the maintenance DAG of a job file runs with `dag.test()`
(SQLite metadata database, spark-submit against local[2]) and its output validates; a failed
validation fails the DAG run before tiering; the on-demand DAG cleans with its params."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.runtime.session import DRIVER_JAVA_OPTIONS, driver_java_options
from segment_io.exit_codes import ExitCode
from segment_io.layout import META_DIR
from segment_io.storage import open_storage

pytestmark = pytest.mark.airflow
ROOT = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).with_name("dag_runner.py")
LOGICAL_DATE = "2026-11-24T00:00:00+00:00"
RUN = "20261124"  # the logical date as the DAG names the run


def _job(name: str, src: Path, root: Path) -> str:
    samples = (ROOT / "conf" / "samples.yaml").read_text()
    return (
        f"name: {name}\nsource: {src}\noutput: {root}/{name}/out/{{run}}\nremote: {root}/{name}/remote/{{run}}\n"
        "steps: [retention, compact, validate, tier, expire]\nnow: 2023-11-23T00:40:00Z\n"
        "spark: {connection: spark_local, conf: {spark.task.maxFailures: 2}}\n"
        "airflow: {schedule: '@daily', retries: 1, retry_delay_minutes: 0, timeout_minutes: 20}\n"
        "configs:\n" + "".join(f"  {line}\n" for line in samples.splitlines())
    )


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory: pytest.TempPathFactory, sample_dir: Path) -> dict[str, str]:
    """Airflow's home with a migrated SQLite database, and a folder of two job files."""
    root = tmp_path_factory.mktemp("airflow")
    jobs = root / "jobs"
    jobs.mkdir()
    for name in ("good", "bad"):
        (jobs / f"{name}.yaml").write_text(_job(name, sample_dir, root))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "SEGPIPE_FAULT"))}
    env.update(
        AIRFLOW_HOME=str(root / "home"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "dags"),
        AIRFLOW_CONN_SPARK_LOCAL=json.dumps({"conn_type": "spark", "host": "local[2]"}),
        AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "local[2]"}),
        SEGPIPE_JOBS_DIR=str(jobs),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # spark-submit
        PYSPARK_PYTHON=sys.executable,
        ROOT=str(root),
    )
    airflow = Path(sys.executable).parent / "airflow"
    migrate = subprocess.run(
        [str(airflow), "db", "migrate"], env=env, capture_output=True, text=True, timeout=300
    )
    assert migrate.returncode == ExitCode.OK, migrate.stderr[-2000:]
    return env


@pytest.fixture(scope="module")
def dag_runs(airflow_env: dict[str, str], sample_dir: Path) -> dict[str, dict]:
    """The DAGs as imported, and the runs of the maintenance DAG of the good job file, of the bad
    one (its clean step publishes an output with one byte flipped: the corrupt-output fault) and
    of the on-demand DAG with its params, one after another by one Airflow process (its start
    paid once): {"imported": ..., "runs": {DAG id: result}}."""
    params = {
        "src": str(sample_dir),
        "dst": str(Path(airflow_env["ROOT"]) / "on-demand"),
        "topics": ["orders"],
        "now": "1700700000000",
        "configs": {"cleanup.policy": "compact"},
        "validate": False,
    }
    runs = [
        {"dag": "segpipe_good", "date": LOGICAL_DATE},
        {"dag": "segpipe_bad", "date": LOGICAL_DATE, "env": {"SEGPIPE_FAULT": "corrupt-output"}},
        {"dag": "segpipe_on_demand", "date": LOGICAL_DATE, "params": params},
    ]
    return _runner(airflow_env, runs)


def _runner(env: dict[str, str], runs: list[dict]) -> dict:
    proc = subprocess.run(
        [sys.executable, str(RUNNER), json.dumps(runs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=env["ROOT"],
    )
    assert proc.returncode == ExitCode.OK, (proc.stdout + proc.stderr)[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _java_options(command: list[str]) -> str | None:
    """The driver JVM options a spark-submit command line sets, if any."""
    found = [c.split("=", 1)[1] for c in command if c.startswith(f"{DRIVER_JAVA_OPTIONS}=")]
    return found[-1] if found else None


def test_every_dag_imports(dag_runs: dict[str, dict]) -> None:
    """Every DAG imports, and every spark-submit task starts segpipe's driver JVM as segpipe
    starts one itself (the quick compiler, this install's class archive)."""
    bag = dag_runs["imported"]
    assert bag["errors"] == {}
    steps = ["retention_compact", "validate", "tier", "expire"]
    assert bag["dags"] == {
        "segpipe_bad": steps,
        "segpipe_good": steps,
        "segpipe_on_demand": ["arguments", "clean"],
    }
    submits = [(d, t, c) for d, tasks in bag["commands"].items() for t, c in tasks.items()]
    assert len(submits) == 9
    assert "-XX:SharedArchiveFile=" in driver_java_options()  # the install's archive exists
    for dag, task, command in submits:
        assert _java_options(command) == driver_java_options(), (dag, task, command)


def test_a_refused_job_file_fails_alone_and_parsing_touches_no_storage(
    airflow_env: dict[str, str], sample_dir: Path
) -> None:
    jobs = Path(airflow_env["ROOT"]) / "jobs-with-a-typo"
    jobs.mkdir()
    (jobs / "good.yaml").write_text(_job("good", sample_dir, jobs))
    (jobs / "typo.yaml").write_text(_job("typo", sample_dir, jobs).replace("steps:", "stepz:"))
    # An object-store source is not looked at while the file is parsed (no store answers here).
    remote = _job("remote", sample_dir, jobs).replace(f"source: {sample_dir}", "source: s3://nowhere/logs")
    # A job's own driver JVM options are its steps' (segpipe's are not added to them).
    remote = remote.replace("conf: {spark.task.maxFailures: 2}", f"conf: {{{DRIVER_JAVA_OPTIONS}: -Xss4m}}")
    (jobs / "remote.yaml").write_text(remote)
    # A compaction in place of a broker's Kafka tier: one task, its step, for each scheduled run.
    (jobs / "in-place.yaml").write_text(
        f"name: tier_compaction\nsource: {sample_dir}\nkafka_tier: {jobs}/server.properties\n"
        "in_place: {bootstrap_server: '127.0.0.1:9'}\nsteps: [compact]\n"
        "configs: {topics: {orders: {cleanup.policy: compact}}}\n"
    )
    env = {**airflow_env, "SEGPIPE_JOBS_DIR": str(jobs), "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
    found = _runner(env, [{"dag": "segpipe_typo", "date": LOGICAL_DATE}])
    bag = found["imported"]
    assert bag["errors"] == {}
    assert (
        bag["dags"]["segpipe_good"]
        == bag["dags"]["segpipe_remote"]
        == ["retention_compact", "validate", "tier", "expire"]
    )
    assert bag["dags"]["segpipe_typo"] == ["job_file_refused"]
    assert bag["dags"]["segpipe_tier_compaction"] == ["compact"]
    (command,) = bag["commands"]["segpipe_tier_compaction"].values()
    assert command[-6:] == [
        "run",
        str(jobs / "in-place.yaml"),
        "--step",
        "compact",
        "--run",
        "{{ ds_nodash }}",
    ]
    assert {_java_options(c) for c in bag["commands"]["segpipe_remote"].values()} == {"-Xss4m"}
    assert {_java_options(c) for c in bag["commands"]["segpipe_good"].values()} == {driver_java_options()}
    result = found["runs"]["segpipe_typo"]
    assert result["state"] == "failed" and result["tasks"] == {"job_file_refused": "failed"}


def test_the_maintenance_dag_runs_every_step(airflow_env: dict[str, str], dag_runs: dict[str, dict]) -> None:
    result = dag_runs["runs"]["segpipe_good"]
    assert result["state"] == "success", result
    assert set(result["tasks"].values()) == {"success"}
    values = result["values"]
    # Each task's return value is what its step recorded in the run's state file.
    assert set(values["retention_compact"]["partitions"]) == {
        "clicks-0",
        "legacy-users-0",
        "orders-0",
        "orders-1",
    }
    assert values["validate"]["success"] is True and values["validate"]["checked"]
    assert values["tier"]["segments_uploaded"] > 0
    root = Path(airflow_env["ROOT"]) / "good"
    state = json.loads((root / "out" / f"{RUN}.run.json").read_text())
    assert [state["steps"][s]["state"] for s in ("compact", "validate", "tier", "expire")] == ["done"] * 4
    assert (root / "remote" / RUN).is_dir()


def test_a_failed_validation_stops_the_dag_before_tiering(
    airflow_env: dict[str, str], dag_runs: dict[str, dict]
) -> None:
    # The clean step publishes an output with one byte flipped (the corrupt-output fault).
    result = dag_runs["runs"]["segpipe_bad"]
    assert result["state"] == "failed", result
    assert result["tasks"]["retention_compact"] == "success"
    assert result["tasks"]["validate"] == "failed"
    assert result["tasks"]["tier"] == "upstream_failed" and result["tasks"]["expire"] == "upstream_failed"
    root = Path(airflow_env["ROOT"]) / "bad"
    assert not (root / "remote").exists()
    state = json.loads((root / "out" / f"{RUN}.run.json").read_text())
    assert state["steps"]["validate"]["state"] == "failed" and "tier" not in state["steps"]


def test_the_on_demand_dag_cleans_with_its_params(
    airflow_env: dict[str, str], dag_runs: dict[str, dict]
) -> None:
    dst = Path(airflow_env["ROOT"]) / "on-demand"
    result = dag_runs["runs"]["segpipe_on_demand"]
    assert result["state"] == "success", result
    assert sorted(p.name for p in dst.iterdir() if p.is_dir() and p.name != META_DIR) == [
        "orders-0",
        "orders-1",
    ]
    storage, path = open_storage(str(dst / META_DIR / "manifest.json"))
    manifest = json.loads(storage.read(path))
    assert manifest["now_ms"] == 1_700_700_000_000
    assert {p["partition"] for p in manifest["partitions"]} == {"orders-0", "orders-1"}


KILL_SCRIPT = """
import json, os, subprocess, sys, time
sys.path.append(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
import psutil
from segpipe_steps import APPLICATION, SegpipeStep

job = sys.argv[1]
# spark-submit's stand-in: a parent process that runs segpipe's application and exits with its code.
submit = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))",
                           sys.executable, APPLICATION, "run", job, "--step", "compact", "--run", "r1"])
op = SegpipeStep(task_id="compact", job_file=job, step="compact", conn_id="spark_default")
op._hook = op._get_hook()
op._hook._submit_sp = submit
deadline = time.monotonic() + 120  # bounded: the driver pauses itself at its fault point
paused = False
while not paused and time.monotonic() < deadline and submit.poll() is None:
    drivers = [p for p in psutil.Process(submit.pid).children() if APPLICATION in p.cmdline()]
    paused = any(p.status() == psutil.STATUS_STOPPED for p in drivers)
    time.sleep(0.05)
began = time.monotonic()
op.on_kill()
code = submit.wait(timeout=120)
print(json.dumps({"paused": paused, "code": code, "seconds": time.monotonic() - began}))
"""


def test_a_killed_step_task_stops_its_run_and_a_cleared_task_completes_it(
    airflow_env: dict[str, str], sample_dir: Path, tmp_path: Path
) -> None:
    """Airflow kills a task through its operator's on_kill: segpipe's driver gets SIGTERM (the
    provider alone would SIGKILL spark-submit, which its driver can outlive) while its step has
    staged its output, and ends with 143 and no staging left; spark-submit ends with it; the step
    run again (a cleared task) completes it as an uninterrupted run does."""
    jobs = {}
    for name in ("killed", "whole"):
        (tmp_path / name).mkdir()
        jobs[name] = tmp_path / name / "job.yaml"
        jobs[name].write_text(_job(name, sample_dir, tmp_path))
    env = {**airflow_env, "SEGPIPE_FAULT": "before-publish:SIGSTOP"}
    proc = subprocess.run(
        [sys.executable, "-c", KILL_SCRIPT, str(jobs["killed"])],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["paused"] and result["code"] == ExitCode.TERMINATED and result["seconds"] < 30, (
        result,
        proc.stderr[-3000:],
    )
    # The signal reaches the driver as it resumes at the point before its publication: it stops
    # there, or (the signal taken a moment later) lets the publication it began finish.
    out = tmp_path / "killed" / "out"
    if "segpipe: terminated; nothing was published" in proc.stderr:
        assert not (out / "r1").exists()
    else:
        assert f"segpipe: terminated; published before the stop: {out / 'r1'}" in proc.stderr, proc.stderr
    assert not list(out.glob(".*staging*"))
    env = {k: v for k, v in airflow_env.items() if k != "SEGPIPE_FAULT"}
    for name in ("killed", "whole"):
        step = subprocess.run(
            [
                sys.executable,
                "-m",
                "pipelines.cli",
                "run",
                str(jobs[name]),
                "--step",
                "compact",
                "--run",
                "r1",
            ],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert step.returncode == ExitCode.OK, step.stderr[-3000:]
    from tests.helpers import files_of

    assert files_of(out / "r1") == files_of(tmp_path / "whole" / "out" / "r1")
