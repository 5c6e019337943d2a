"""The `clean` job: Kafka's retention and compaction of a log directory into a new one.

from pipelines.jobs.clean import clean
report = clean(spark, "/var/lib/kafka-archive", "/tmp/cleaned", JobConfig.build({...}))
"""

from pipelines.jobs.clean.job import WORKER_MODULES, clean

__all__ = ["WORKER_MODULES", "clean"]
