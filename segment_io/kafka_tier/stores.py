"""The writer of a Kafka remote tier's layout, picked by the plugin its settings name."""

from __future__ import annotations

import posixpath

from segment_io.errors import KafkaTierSettings
from segment_io.kafka_tier.local_tiered import LocalTieredStore
from segment_io.kafka_tier.settings import AIVEN_RSM, TierSettings
from segment_io.kafka_tier.swap import SegmentStore
from segment_io.layout import KAFKA_TIER_SWAPS, META_DIR
from segment_io.storage.base import Storage


def segment_store(settings: TierSettings, storage: Storage, root: str) -> SegmentStore:
    if settings.plugin == AIVEN_RSM:
        raise KafkaTierSettings(
            f"{settings.plugin}: segpipe reads this plugin's layout but does not yet change it in place; "
            "erase the broker's log directory into a new one instead (erase SRC DST --kafka-tier)"
        )
    return LocalTieredStore(storage, root)


def staging_dir(store: SegmentStore) -> str:
    """Where a run writes its rewritten segments before they are uploaded under their names:
    beside the tier's objects, so that every worker reaches it, and never named by any metadata."""
    return posixpath.join(store.root, META_DIR, f"{KAFKA_TIER_SWAPS}-staging")
