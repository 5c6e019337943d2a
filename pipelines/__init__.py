"""Spark jobs over segment_io.

    import pipelines
    report = pipelines.clean(spark, "/var/lib/kafka-archive", "/tmp/cleaned", config)
    report.to_dataframe(spark).show()     # one metrics row per partition

`clean` is loaded on first use so `segpipe inspect`/`dump` never import the Spark jobs.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "clean":
        from pipelines.cleaner import clean

        return clean
    raise AttributeError(f"module 'pipelines' has no attribute {name!r}")
