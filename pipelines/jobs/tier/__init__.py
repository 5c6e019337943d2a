"""The `tier` job: cold segments to a remote tier with Kafka's rules; `restore` and `expire`
over the same tier.

from pipelines.jobs.tier import tier
report = tier(spark, "/var/lib/kafka/data", "s3://archive/kafka", JobConfig.build({...}))
"""

from pipelines.jobs.tier.job import WORKER_MODULES, tier

__all__ = ["WORKER_MODULES", "tier"]
