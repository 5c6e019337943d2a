"""The `validate` job: great-expectations suites that prove a log directory is sound.

from pipelines.jobs.validate import validate
result = validate(spark, "/tmp/cleaned", report_dir="/tmp/cleaned-docs")
result.to_dataframe(spark).show()      # one row per rule: rows judged, rows that broke it
result = run_validate(spark, ValidateRequest(path="/tmp/cleaned", against="/var/lib/kafka-archive"))
"""

from pipelines.jobs.validate.job import (
    WORKER_MODULES,
    ValidationReport,
    default_report_dir,
    needs_spark,
    run_validate,
    validate,
)
from pipelines.jobs.validate.request import ValidateRequest

__all__ = [
    "WORKER_MODULES",
    "ValidateRequest",
    "ValidationReport",
    "default_report_dir",
    "needs_spark",
    "run_validate",
    "validate",
]
