"""The `clean` job: Kafka's retention and compaction of a log directory into a new one.

from pipelines.jobs.clean import clean
report = clean(spark, "/var/lib/kafka-archive", "/tmp/cleaned", JobConfig.build({...}))

or, with every option in one value (what the command line builds):

from pipelines.jobs.clean import CleanRequest, run_clean
report = run_clean(spark, CleanRequest(src="/var/lib/kafka-archive", dst="/tmp/cleaned", link=True))
"""

from pipelines.jobs.clean.job import WORKER_MODULES, clean, run_clean
from pipelines.jobs.clean.request import CleanRequest

__all__ = ["WORKER_MODULES", "CleanRequest", "clean", "run_clean"]
