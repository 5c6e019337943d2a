"""The `tier` job: cold segments to a remote tier with Kafka's rules; `restore` and `expire`
over the same tier.

from pipelines.jobs.tier import tier
report = tier(spark, "/var/lib/kafka/data", "s3://archive/kafka", JobConfig.build({...}))
report = run_tier(spark, TierRequest(log_dir="/var/lib/kafka/data", remote="s3://archive/kafka"))
"""

from pipelines.jobs.tier.job import WORKER_MODULES, run_tier, tier
from pipelines.jobs.tier.request import RestoreRequest, TierRequest

__all__ = ["WORKER_MODULES", "RestoreRequest", "TierRequest", "run_tier", "tier"]
