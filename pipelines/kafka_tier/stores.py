"""The writer of a Kafka remote tier's layout, picked by the plugin its settings name: Kafka's
LocalTieredStorage (its files, under their names), or Aiven's (chunked, compressed and encrypted
as the plugin is configured to write)."""

from __future__ import annotations

import itertools
import posixpath

from pipelines.kafka_tier.swap import EMPTY_UNSERVED, SegmentStore
from segment_io.errors import KafkaTierSettings, UploadFailed
from segment_io.kafka_tier.aiven import SUFFIXES, AivenSegment, object_key
from segment_io.kafka_tier.aiven_write import AivenWriting, write_aiven_segment
from segment_io.kafka_tier.keyring import Keyring, PublicKey
from segment_io.kafka_tier.local_tiered import LocalTieredStore
from segment_io.kafka_tier.metadata import SegmentMetadata
from segment_io.kafka_tier.objects import SuccessorFiles
from segment_io.kafka_tier.settings import AIVEN_RSM, TierSettings
from segment_io.layout import KAFKA_TIER_SWAPS, META_DIR
from segment_io.storage.base import Checksum, Storage, checksum_of

AIVEN_INDEX_KINDS = ("index", "timeindex", "snapshot", "leader-epoch", "txnindex")


class AivenStore:
    """Aiven's layout written: the `.log`, `.indexes` and `.rsm-manifest` objects, with a new data
    key wrapped by the active key pair's public key where encryption is on."""

    # The plugin's fetch finds the chunk that holds its start position; a log of no bytes has no
    # chunk, so every fetch of such a segment fails ("Invalid start position").
    serves_empty_segments = False

    def __init__(self, settings: TierSettings, storage: Storage, root: str, keyring: Keyring) -> None:
        self.storage, self.root, self.keyring = storage, root, keyring
        self.prefix = settings.key_prefix
        if settings.chunk_size is None:
            raise KafkaTierSettings(f"{settings.source}: rsm.config.chunk.size is not set")
        public = None
        if settings.encryption:
            pair = settings.active_key_pair
            if pair is None or pair not in settings.public_keys:
                raise KafkaTierSettings(
                    f"{settings.source}: encryption is on, and rewritten segments are encrypted with the "
                    "active key pair (rsm.config.encryption.key.pair.id): its public key file is not set"
                )
            public = PublicKey.load(pair, settings.public_keys[pair])
        self.how = AivenWriting(settings.chunk_size, settings.compression, public, self.prefix)

    def upload(self, seg: SegmentMetadata, files: SuccessorFiles) -> bytes | None:
        log = iter(files.log)
        first = next((chunk for chunk in log if chunk), None)
        if first is None:  # refused before any object is written
            where = f"{self.root.rstrip('/')}/{object_key(seg, self.prefix, 'log')}"
            raise UploadFailed(where, EMPTY_UNSERVED)
        indexes = {kind: files.others.get(kind) for kind in AIVEN_INDEX_KINDS}
        return write_aiven_segment(
            self.storage, self.root, seg, itertools.chain([first], log), indexes, self.how
        ).custom_metadata

    def read_back(self, seg: SegmentMetadata) -> Checksum:
        found = AivenSegment(self.storage, self.root, seg, self.prefix, self.keyring)
        found.check()
        return checksum_of(found.log_chunks())

    def delete(self, seg: SegmentMetadata) -> None:
        for suffix in SUFFIXES:
            self.storage.remove(f"{self.root.rstrip('/')}/{object_key(seg, self.prefix, suffix)}")


def segment_store(settings: TierSettings, storage: Storage, root: str, keyring: Keyring) -> SegmentStore:
    if settings.plugin == AIVEN_RSM:
        return AivenStore(settings, storage, root, keyring)
    return LocalTieredStore(storage, root)


def staging_dir(store: SegmentStore) -> str:
    """Where a run writes its rewritten segments before they are uploaded under their names:
    beside the tier's objects, so that every worker reaches it, and never named by any metadata."""
    return posixpath.join(store.root, META_DIR, f"{KAFKA_TIER_SWAPS}-staging")


def lock_path(store: SegmentStore) -> str:
    """The lock a run swapping segments in the tier holds (one run at a time)."""
    return posixpath.join(store.root, META_DIR, f"{KAFKA_TIER_SWAPS}.lock")
