"""The `validate` job: great-expectations suites that prove a log directory is sound.

from pipelines.jobs.validate import validate
result = validate(spark, "/tmp/cleaned", report_dir="/tmp/cleaned-docs")
result.to_dataframe(spark).show()      # one row per rule: rows judged, rows that broke it
"""

from pipelines.jobs.validate.job import (
    WORKER_MODULES,
    ValidationReport,
    default_report_dir,
    needs_spark,
    validate,
)

__all__ = ["WORKER_MODULES", "ValidationReport", "default_report_dir", "needs_spark", "validate"]
