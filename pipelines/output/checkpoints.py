"""The root checkpoint files of an output log directory, written from their entries."""

from __future__ import annotations

import posixpath

from pipelines.output.staging import Staging
from segment_io.checkpoints import format_offset_checkpoint
from segment_io.layout import ROOT_CHECKPOINTS
from segment_io.topic_partition import TopicPartition


def write_checkpoint_files(
    staging: Staging, checkpoints: dict[str, dict[TopicPartition, int]], present: set[str]
) -> None:
    """Each root checkpoint that has entries, or that the source had (`present`), even empty."""
    for name in ROOT_CHECKPOINTS:
        entries = checkpoints.get(name)
        if entries or name in present:
            staging.storage.write_atomic(
                posixpath.join(staging.path, name), format_offset_checkpoint(entries or {})
            )
