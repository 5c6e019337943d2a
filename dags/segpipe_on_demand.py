"""`segpipe_on_demand`: one `segpipe clean` run with the parameters given when it is triggered
(SRC, DST, topics, topic configs, `now`, validation, dry run), through spark-submit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import DAG, Param, task
from segpipe_steps import APPLICATION, SegpipeSubmit, clean_arguments

with DAG(
    dag_id="segpipe_on_demand",
    description="segpipe clean SRC DST, on demand",
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    tags=["segpipe"],
    render_template_as_native_obj=True,  # the command line reaches spark-submit as a list
    default_args={"retries": 0, "execution_timeout": timedelta(hours=4)},
    params={
        "src": Param("", type="string", description="the log directory to clean (path or URL)"),
        "dst": Param("", type="string", description="the new log directory (absent or empty)"),
        "topics": Param([], type="array", description="topic names or globs to keep (empty: all)"),
        "configs": Param({}, type="object", description="Kafka topic configs for every topic"),
        "topic_configs": Param({}, type="object", description="per topic: {topic: {config: value}}"),
        "now": Param(None, type=["null", "string"], description="epoch ms or ISO-8601 (default: the clock)"),
        "validate": Param(True, type="boolean", description="validate before publishing"),
        "dry_run": Param(False, type="boolean", description="print the plan; write nothing"),
    },
) as dag:

    @task
    def arguments(params: dict[str, Any] | None = None) -> list[str]:
        return clean_arguments(params or {})

    arguments() >> SegpipeSubmit(
        task_id="clean",
        conn_id="spark_default",
        application=APPLICATION,
        application_args="{{ ti.xcom_pull(task_ids='arguments') }}",  # type: ignore[arg-type]
        name="segpipe-clean",
    )
