"""How a job file's job runs and is scheduled: its `spark` and `airflow` maps, read and checked."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from pipelines.config.job_schema import AIRFLOW_KEYS, SPARK_KEYS, AirflowSettings, SparkSettings
from pipelines.config.yaml_node import YamlNode, section


def spark_settings(node: YamlNode | None) -> SparkSettings:
    """A job file's `spark` map: the master, the Airflow connection, Spark settings."""
    items = section(node, SPARK_KEYS, "spark")
    conf: dict[str, str] = {}
    if "conf" in items:
        for name, item in items["conf"].mapping("spark.conf").items():
            if not name.startswith("spark."):
                raise item.refuse(f"spark.conf: '{name}' is not a Spark setting (names start with spark.)")
            conf[name] = str(item.value())
    return SparkSettings(
        master=items["master"].string("spark.master") if "master" in items else None,
        connection=(
            items["connection"].string("spark.connection") if "connection" in items else "spark_default"
        ),
        conf=conf,
    )


def airflow_settings(node: YamlNode | None) -> AirflowSettings:
    """A job file's `airflow` map: how the maintenance DAG schedules the job."""
    items = section(node, AIRFLOW_KEYS, "airflow")
    defaults = AirflowSettings()
    integer: Callable[[str, int], int] = lambda name, low: (  # noqa: E731
        items[name].integer(f"airflow.{name}", low) if name in items else getattr(defaults, name)
    )
    start = items["start_date"].string("airflow.start_date") if "start_date" in items else defaults.start_date
    try:  # as the DAG reads it
        datetime.fromisoformat(start)
    except ValueError:
        raise items["start_date"].refuse(f"airflow.start_date {start!r}: expected an ISO-8601 date") from None
    return AirflowSettings(
        schedule=items["schedule"].string("airflow.schedule") if "schedule" in items else defaults.schedule,
        start_date=start,
        retries=integer("retries", 0),
        retry_delay_minutes=integer("retry_delay_minutes", 0),
        timeout_minutes=integer("timeout_minutes", 1),
    )
