"""The root files of an output log directory: its checkpoints, written from their entries, and
its source's identity (`meta.properties`) carried as it is."""

from __future__ import annotations

import posixpath

from pipelines.output.staging import Staging
from segment_io.checkpoints import format_offset_checkpoint
from segment_io.layout import META_PROPERTIES, ROOT_CHECKPOINTS
from segment_io.storage import Location
from segment_io.topic_partition import TopicPartition


def write_checkpoint_files(
    staging: Staging,
    checkpoints: dict[str, dict[TopicPartition, int]],
    present: set[str],
    source: Location,
) -> None:
    """Each root checkpoint that has entries, or that the source had (`present`), even empty; and
    the source's meta.properties, where it has one."""
    for info in source.storage.list(source.path):
        if info.name == META_PROPERTIES and not info.is_dir:
            staging.storage.write_atomic(
                posixpath.join(staging.path, info.name), source.storage.read(info.path)
            )
    for name in ROOT_CHECKPOINTS:
        entries = checkpoints.get(name)
        if entries or name in present:
            staging.storage.write_atomic(
                posixpath.join(staging.path, name), format_offset_checkpoint(entries or {})
            )
