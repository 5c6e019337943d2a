"""Spark Connect: which server a run talks to, its session, and telling a Connect session from a
classic one (no SparkContext, no JVM in this process)."""

from __future__ import annotations

import os
from typing import Any

from pipelines.errors import ConfigError


def remote_url(master: str | None, remote: str | None) -> str | None:
    """The Spark Connect server a run talks to: `remote` (--spark-remote), else PySpark's own
    SPARK_REMOTE unless a master is named; a master and a remote together are refused."""
    if remote and master:
        raise ConfigError("--master and --spark-remote name two different Sparks: pass one of them")
    if remote or master:
        return remote or None
    return os.environ.get("SPARK_REMOTE") or None


def connect(url: str, app_name: str, settings: dict[str, str]) -> Any:
    """A Spark Connect session at `url` with `settings` (segpipe's session settings and the run's
    own `--conf`: runtime settings only; the server's own are its operator's)."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import SparkSession

    if not url.startswith("sc://"):
        raise ConfigError(f"--spark-remote {url!r}: a Spark Connect URL starts with sc://")
    spark = SparkSession.builder.remote(url).appName(app_name).getOrCreate()
    for key, value in settings.items():
        try:
            spark.conf.set(key, value)
        except AnalysisException as exc:  # a static setting: fixed when the server started
            raise ConfigError(f"--conf {key}: the Spark Connect server does not take it ({exc})") from exc
    return spark


def is_connect(spark: Any) -> bool:
    """Whether `spark` is a Spark Connect session (no SparkContext, no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")
