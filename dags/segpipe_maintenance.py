"""One scheduled maintenance DAG per job file (`conf/jobs/*.yaml`, or the directory in
$SEGPIPE_JOBS_DIR): `segpipe_<name>`, one task per step in the job's order, each a spark-submit
of `segpipe run JOB --step STEP` against the job's Spark connection. A failed step stops the DAG:
a failed validation never lets tiering run.

A job file is parsed without touching storage (its source is checked when a step runs), and one
that segpipe refuses fails alone: its DAG (`segpipe_<file name>`) holds one task that fails with
the refusal (file, line, reason), and every other job keeps its DAG."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG
from segpipe_steps import RefusedJobFile, SegpipeStep

from pipelines.config.jobfile import load_job_file
from pipelines.errors import ConfigError
from pipelines.run.runner import unit_name

JOBS = Path(os.environ.get("SEGPIPE_JOBS_DIR", Path(__file__).resolve().parents[1] / "conf" / "jobs"))

for path in sorted(JOBS.glob("*.yaml")):
    try:
        job = load_job_file(str(path), check_source=False)
    except ConfigError as refused:
        with DAG(
            dag_id=f"segpipe_{path.stem}",
            description=f"segpipe: job file refused: {refused}",
            schedule="@daily",  # fails where operators look, until the file is mended
            start_date=datetime(2026, 1, 1, tzinfo=UTC),
            catchup=False,
            tags=["segpipe", "refused"],
        ) as dag:
            RefusedJobFile(task_id="job_file_refused", reason=str(refused))
        globals()[dag.dag_id] = dag
        continue
    settings = job.airflow
    with DAG(
        dag_id=f"segpipe_{job.name}",
        description=f"segpipe maintenance: {' → '.join(job.steps)} ({path.name})",
        schedule=settings.schedule,
        start_date=datetime.fromisoformat(settings.start_date).replace(tzinfo=UTC),
        catchup=False,
        max_active_runs=1,  # runs of one job never overlap
        tags=["segpipe"],
        default_args={
            "retries": settings.retries,
            "retry_delay": timedelta(minutes=settings.retry_delay_minutes),
            "execution_timeout": timedelta(minutes=settings.timeout_minutes),
        },
    ) as dag:
        previous = None
        for unit in job.units():
            task = SegpipeStep(
                task_id=unit_name(unit).replace("+", "_"),
                job_file=str(path),
                step=unit[0],
                conn_id=job.spark.connection,
                conf=dict(job.spark.conf),
            )
            if previous is not None:
                previous >> task
            previous = task
    globals()[dag.dag_id] = dag
