"""A segment written in Aiven's layout, as its RemoteStorageManager writes one (see aiven.py for
the layout): what a rewritten remote segment is uploaded as.

The `.log` object is the segment in chunks of the configured size, each zstd-compressed (with the
frame's content size) where compression is on, then AES-256-GCM-encrypted under a new data key
with a random 12-byte IV where encryption is on; the chunk index is "variable" when chunks are
compressed (their sizes differ), else "fixed". The `.indexes` object holds the offset, time,
producer snapshot, leader epoch and (when the segment has one) transaction indexes, each one
chunk, encrypted but never compressed. The manifest is the plugin's JSON, key for key and in its
order; the custom metadata carries the sizes and the object key the broker's metadata records.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from segment_io.format.protocol import ProtocolWriter
from segment_io.kafka_tier.aiven import (
    IV_BYTES,
    OBJECT_KEY,
    OBJECT_PREFIX,
    REMOTE_SIZE,
    default_main_path,
    encode_chunk_sizes,
)
from segment_io.kafka_tier.keyring import PublicKey
from segment_io.kafka_tier.metadata import SegmentMetadata
from segment_io.storage.base import Storage

# The manifest's names of the segment indexes, in the order the plugin stores them.
INDEX_ORDER = (
    ("offset", "index"),
    ("timestamp", "timeindex"),
    ("producerSnapshot", "snapshot"),
    ("leaderEpoch", "leader-epoch"),
    ("transaction", "txnindex"),
)
DATA_KEY_BYTES = 32


@dataclass(frozen=True)
class AivenWriting:
    """How the plugin is configured to write: chunk size, compression, and the key pair new data
    keys are wrapped with (None: no encryption)."""

    chunk_size: int
    compression: bool
    public_key: PublicKey | None
    prefix: str = ""


@dataclass(frozen=True)
class WrittenSegment:
    manifest: dict[str, Any]
    custom_metadata: bytes  # the tagged fields the COPY_SEGMENT_FINISHED update carries
    object_key: str  # `<topic>-<topicId>/<partition>/<start>-<id>`, without prefix and suffix
    sizes: dict[str, int]  # bytes uploaded per suffix


def _metadata_json(seg: SegmentMetadata) -> dict[str, Any]:
    out: dict[str, Any] = {
        "remoteLogSegmentId": {
            "topicIdPartition": {
                "topicId": seg.tp.topic_id,
                "topicPartition": {"topic": seg.tp.topic, "partition": seg.tp.partition},
            },
            "id": seg.segment_id,
        },
        "startOffset": seg.start_offset,
        "endOffset": seg.end_offset,
        "maxTimestampMs": seg.max_timestamp_ms,
        "brokerId": seg.broker_id,
        "eventTimestampMs": seg.event_timestamp_ms,
        "segmentLeaderEpochs": {str(epoch): offset for epoch, offset in seg.leader_epochs},
    }
    if seg.txn_index_empty is not None:
        out["txnIdxEmpty"] = seg.txn_index_empty
    return out


def custom_metadata(sizes: dict[str, int], prefix: str, object_key: str) -> bytes:
    """The tagged-fields section of REMOTE_SIZE, OBJECT_PREFIX and OBJECT_KEY."""
    fields = {
        REMOTE_SIZE: ProtocolWriter().varlong(sum(sizes.values())).done(),
        OBJECT_PREFIX: ProtocolWriter().string(prefix).done(),
        OBJECT_KEY: ProtocolWriter().string(object_key).done(),
    }
    return ProtocolWriter().tagged_fields(fields).done()


def write_aiven_segment(
    storage: Storage,
    root: str,
    seg: SegmentMetadata,
    log: Iterable[bytes],
    indexes: dict[str, bytes | None],
    how: AivenWriting,
    random: Callable[[int], bytes] = os.urandom,
) -> WrittenSegment:
    """Upload the segment `seg` (its `log` as chunks of any size, streamed: one chunk of the
    configured size transformed at a time; its `indexes` by Kafka suffix: index, timeindex,
    snapshot, leader-epoch, txnindex) as the plugin would, each object read back and checked;
    returns its manifest and custom metadata. `random` draws the data key, the AAD, the IVs and the
    OAEP seed (injected for tests)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    cipher = aad = None
    encryption = None
    if how.public_key is not None:
        data_key, aad = random(DATA_KEY_BYTES), random(DATA_KEY_BYTES)
        cipher = AESGCM(data_key)
        wrapped = how.public_key.wrap(data_key, random(64))
        encryption = {
            "dataKey": f"{how.public_key.key_id}:{base64.b64encode(wrapped).decode()}",
            "aad": base64.b64encode(aad).decode(),
        }

    def seal(chunk: bytes) -> bytes:
        if cipher is None:
            return chunk
        iv = random(IV_BYTES)
        return iv + cipher.encrypt(iv, chunk, aad)

    compressor: Any = None
    if how.compression:
        import zstandard

        compressor = zstandard.ZstdCompressor(write_content_size=True)
    original, sealed_sizes = 0, list[int]()

    def transformed() -> Iterator[bytes]:
        nonlocal original
        for chunk in rechunk(log, how.chunk_size):
            original += len(chunk)
            sealed = seal(chunk if compressor is None else compressor.compress(chunk))
            sealed_sizes.append(len(sealed))
            yield sealed

    main = default_main_path(seg)
    sizes = {"log": _put(storage, root, how, main, "log", transformed())}
    chunk_index: dict[str, Any] = {
        "type": "variable" if how.compression else "fixed",
        "originalChunkSize": how.chunk_size,
        "originalFileSize": original,
    }
    if how.compression:
        chunk_index["transformedChunks"] = encode_chunk_sizes(sealed_sizes)
    else:
        overhead = 0 if cipher is None else IV_BYTES + 16
        chunk_index["transformedChunkSize"] = how.chunk_size + overhead
        chunk_index["finalTransformedChunkSize"] = sealed_sizes[-1] if sealed_sizes else 0
    index_blob, positions = bytearray(), dict[str, dict[str, int] | None]()
    for name, kind in INDEX_ORDER:
        data = indexes.get(kind)
        if data is None:
            positions[name] = None
            continue
        stored = seal(data) if data else b""
        positions[name] = {"position": len(index_blob), "size": len(stored)}
        index_blob += stored
    manifest: dict[str, Any] = {
        "version": "1",
        "chunkIndex": chunk_index,
        "segmentIndexes": positions,
        "compression": how.compression,
    }
    if encryption is not None:
        manifest["encryption"] = encryption
    manifest["remoteLogSegmentMetadata"] = _metadata_json(seg)
    sizes["indexes"] = _put(storage, root, how, main, "indexes", [bytes(index_blob)])
    manifest_json = json.dumps(manifest, separators=(",", ":")).encode()
    sizes["rsm-manifest"] = _put(storage, root, how, main, "rsm-manifest", [manifest_json])
    return WrittenSegment(manifest, custom_metadata(sizes, how.prefix, main), main, sizes)


def _put(
    storage: Storage, root: str, how: AivenWriting, main: str, suffix: str, body: Iterable[bytes]
) -> int:
    """One of the segment's objects uploaded (and read back); its size."""
    return storage.upload(f"{root.rstrip('/')}/{how.prefix}{main}.{suffix}", body).size


def rechunk(chunks: Iterable[bytes], size: int) -> Iterator[bytes]:
    """The bytes `chunks` make, cut again into chunks of `size` (the last one shorter)."""
    held = bytearray()
    for chunk in chunks:
        held += chunk
        while len(held) >= size:
            yield bytes(held[:size])
            del held[:size]
    if held:
        yield bytes(held)
