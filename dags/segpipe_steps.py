"""What segpipe's DAGs share: the task that runs one job step through spark-submit, and the
on-demand DAG's command line. No rule of segpipe's lives here: the tasks run the `segpipe`
command line and read what it recorded."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from pipelines.config.jobfile import load_job_file
from pipelines.run.state import read_state

_CLI = importlib.util.find_spec("pipelines.cli")
assert _CLI is not None and _CLI.submodule_search_locations
# The application spark-submit runs: segpipe's command line.
APPLICATION = os.path.join(next(iter(_CLI.submodule_search_locations)), "__main__.py")
RUN = "{{ ds_nodash }}"  # each scheduled run writes its own output (`{run}` in the job file)
# How long a killed task waits for segpipe's driver to stop on SIGTERM (its Spark tasks settled,
# a publication under way finished, the staging removed) before spark-submit is killed outright.
STOP_GRACE_S = 60.0
SUBMIT_EXIT_S = 10.0  # then how long spark-submit may take to end on its own


def stop_driver(submit_pid: int, grace_s: float = STOP_GRACE_S) -> int:
    """SIGTERM to the segpipe driver that the spark-submit process `submit_pid` runs (never to
    spark-submit's JVM or Spark's Python workers), waiting up to `grace_s` for it to end; returns
    how many drivers ended."""
    import signal

    import psutil

    try:
        submit = psutil.Process(submit_pid)
        drivers = [p for p in submit.children(recursive=True) if APPLICATION in p.cmdline()]
    except psutil.Error:  # spark-submit ended meanwhile
        return 0
    for driver in drivers:
        try:
            driver.send_signal(signal.SIGTERM)
            driver.send_signal(signal.SIGCONT)  # a driver paused (SIGSTOP) takes it only when resumed
        except psutil.NoSuchProcess:
            continue
    gone, _ = psutil.wait_procs(drivers, timeout=grace_s)
    return len(gone)


class SegpipeSubmit(SparkSubmitOperator):
    """spark-submit of segpipe's command line, its driver JVM started with the options segpipe
    starts one with itself (the quick compiler, the class archive: about half the JVM's start-up
    CPU), unless the task's conf sets spark.driver.extraJavaOptions."""

    def _get_hook(self) -> SparkSubmitHook:
        from pipelines.runtime.session import DRIVER_JAVA_OPTIONS, driver_java_options

        self.conf = {DRIVER_JAVA_OPTIONS: driver_java_options(), **(self.conf or {})}
        return super()._get_hook()


class SegpipeStep(SegpipeSubmit):
    """`segpipe run JOB --step STEP --run <logical date>` through spark-submit. Its return value
    (XCom) is what the step recorded in the run's state file; a step whose data failed its
    checks (a validation) fails at once, without retries (a retry would find the same data)."""

    def __init__(self, *, job_file: str, step: str, **kwargs: Any) -> None:
        super().__init__(
            application=APPLICATION,
            application_args=["run", job_file, "--step", step, "--run", RUN],
            name=f"segpipe-{step}",
            **kwargs,
        )
        self.job_file, self.step = job_file, step

    def on_kill(self) -> None:
        """Airflow stops a task (a time-out, mark-failed, a worker's shutdown) through this. The
        provider's own kill is a SIGKILL of spark-submit, which the driver it runs can outlive;
        the driver is sent SIGTERM first, so the step stops as `segpipe run` does on it (exit 143:
        nothing more published, a publication under way finished, the staging removed), and a
        cleared task re-runs the step from the state file."""
        process = getattr(self._hook, "_submit_sp", None) if self._hook is not None else None
        if process is not None and process.poll() is None:
            stopped = stop_driver(process.pid)
            self.log.info("segpipe step %s: %d driver(s) stopped", self.step, stopped)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=SUBMIT_EXIT_S)  # spark-submit ends with its driver
        super().on_kill()

    def _record(self) -> dict[str, Any] | None:
        run = str(self.application_args[-1])  # rendered by now
        state = read_state(load_job_file(self.job_file, check_source=False).for_run(run).state) or {}
        record = state.get("steps", {}).get(self.step)
        return record if isinstance(record, dict) else None

    def execute(self, context: Any) -> dict[str, Any] | None:
        try:
            super().execute(context)
        except AirflowException as exc:
            record = self._record()
            if record is not None and record.get("state") == "failed":
                raise AirflowFailException(f"segpipe step {self.step} failed its checks: {exc}") from exc
            raise
        return self._record()


class RefusedJobFile(BaseOperator):
    """The one task of a job file segpipe refuses: it fails at once with the refusal."""

    def __init__(self, *, reason: str, **kwargs: Any) -> None:
        super().__init__(retries=0, **kwargs)
        self.reason = reason

    def execute(self, context: Any) -> None:
        raise AirflowFailException(f"segpipe job file refused: {self.reason}")


def clean_arguments(params: dict[str, Any]) -> list[str]:
    """The on-demand DAG's params as `segpipe clean`'s command line."""
    args = ["clean", str(params["src"]), str(params["dst"])]
    for pattern in params.get("topics") or []:
        args += ["--topic", str(pattern)]
    for name, value in (params.get("configs") or {}).items():
        args += ["--set", f"{name}={value}"]
    for topic, values in (params.get("topic_configs") or {}).items():
        args += [
            item for name, value in values.items() for item in ("--topic-set", f"{topic}:{name}={value}")
        ]
    if params.get("now"):
        args += ["--now", str(params["now"])]
    if params.get("validate"):
        args.append("--validate")
    if params.get("dry_run"):
        args.append("--dry-run")
    return args
