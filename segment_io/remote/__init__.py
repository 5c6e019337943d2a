"""The remote tier: segments of a Kafka log in object storage under versioned manifests, and a
view that reads a local log directory and its remote tier as one log."""

from segment_io.remote.manifest import PartitionManifest, RemoteObject, RemoteSegment
from segment_io.remote.tier import RemoteTier, SegmentUpload
from segment_io.remote.view import TieredView, tiered_url

__all__ = [
    "PartitionManifest",
    "RemoteObject",
    "RemoteSegment",
    "RemoteTier",
    "SegmentUpload",
    "TieredView",
    "tiered_url",
]
