"""Spark jobs over segment_io.

    import pipelines
    report = pipelines.clean(spark, "/var/lib/kafka-archive", "/tmp/cleaned", config)
    report.to_dataframe(spark).show()     # one metrics row per partition

Jobs are loaded on first use, so the Spark-free commands (`inspect`, `dump`, ...) never import them.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "clean":
        from pipelines.jobs.clean import clean

        return clean
    if name == "tier":
        from pipelines.jobs.tier import tier

        return tier
    if name == "validate":
        from pipelines.jobs.validate import validate

        return validate
    if name == "get_spark":
        from pipelines.runtime.session import get_spark

        return get_spark
    raise AttributeError(f"module 'pipelines' has no attribute {name!r}")
