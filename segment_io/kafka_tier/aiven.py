"""Aiven's tiered-storage layout: how its RemoteStorageManager names, chunks, compresses and
encrypts a segment's objects, read back.

Per segment three objects, under `<prefix><topic>-<topicId>/<partition>/<start %020d>-<id>`:
- `.rsm-manifest` (JSON, version "1"): the chunk index of the `.log` object, where each segment
  index lies in the `.indexes` object, whether chunks are zstd-compressed, and the encryption
  (the AES-256 data key wrapped by a key pair, `<pair id>:<base64>`, and the GCM AAD);
- `.log`: the segment's bytes cut into chunks of `originalChunkSize` bytes, each transformed on its
  own: zstd-compressed (a frame that records its size), then AES-256-GCM-encrypted
  (`IV (12 bytes) | ciphertext | tag (16 bytes)`, the AAD the manifest's);
- `.indexes`: the offset, time, producer snapshot, leader epoch and (when present) transaction
  indexes back to back, each one chunk, encrypted as the log's chunks are but never compressed.
The chunk index is "fixed" (every transformed chunk `transformedChunkSize` bytes, the last
`finalTransformedChunkSize`) or "variable" (the transformed sizes listed: base64 of a zstd frame
of a count, then for more than one value a base and a byte width, each value but the last as
`base + width-byte big-endian` and the last as a full int32). A segment's custom metadata (a
tagged-fields section: 0 REMOTE_SIZE varlong, 1 OBJECT_PREFIX and 2 OBJECT_KEY compact strings)
overrides the configured key prefix and the computed key.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from segment_io.errors import KafkaTierCorrupt, KafkaTierSettings
from segment_io.format.protocol import ProtocolReader
from segment_io.kafka_tier.keyring import Keyring
from segment_io.kafka_tier.metadata import SegmentMetadata
from segment_io.layout import OFFSET_DIGITS
from segment_io.storage.base import Storage

MANIFEST_VERSION = "1"
IV_BYTES = 12
TAG_BYTES = 16
SUFFIXES = ("log", "indexes", "rsm-manifest")
FETCH_BYTES = 8 * 1024 * 1024  # a streamed read of the log fetches about this much per request
# The manifest's names of the segment indexes, as Kafka's file suffixes.
INDEX_KINDS = {
    "offset": "index",
    "timestamp": "timeindex",
    "producerSnapshot": "snapshot",
    "leaderEpoch": "leader-epoch",
    "transaction": "txnindex",
}
REMOTE_SIZE, OBJECT_PREFIX, OBJECT_KEY = 0, 1, 2


@dataclass(frozen=True)
class Chunk:
    original_position: int
    original_size: int
    transformed_position: int
    transformed_size: int


@dataclass(frozen=True)
class AivenManifest:
    original_size: int
    chunks: tuple[Chunk, ...]
    compressed: bool
    wrapped_key: tuple[str, bytes] | None  # (key pair id, RSA-wrapped data key)
    aad: bytes | None
    indexes: dict[str, tuple[int, int]]  # Kafka suffix -> (position, size) in `.indexes`
    segment: dict[str, Any] | None  # the copy of the segment's metadata it carries, if any

    @classmethod
    def parse(cls, data: bytes, where: str) -> AivenManifest:
        try:
            doc = json.loads(data)
            version = doc.get("version")
            if version != MANIFEST_VERSION:
                raise KafkaTierCorrupt(
                    where,
                    None,
                    f"a segment manifest of version {version!r} (only {MANIFEST_VERSION} is known)",
                )
            index = doc["chunkIndex"]
            chunks = _chunks(index, where)
            encryption = doc.get("encryption")
            wrapped = aad = None
            if encryption:
                pair, _, key = encryption["dataKey"].partition(":")
                wrapped, aad = (pair, base64.b64decode(key)), base64.b64decode(encryption["aad"])
            indexes = {
                INDEX_KINDS[name]: (int(r["position"]), int(r["size"]))
                for name, r in doc["segmentIndexes"].items()
                if r is not None and name in INDEX_KINDS
            }
            return cls(
                int(index["originalFileSize"]),
                chunks,
                bool(doc.get("compression")),
                wrapped,
                aad,
                indexes,
                doc.get("remoteLogSegmentMetadata"),
            )
        except KafkaTierCorrupt:
            raise
        except (ValueError, KeyError, TypeError, AttributeError, binascii.Error, struct.error) as exc:
            raise KafkaTierCorrupt(where, None, f"a segment manifest that does not parse: {exc!r}") from None

    def check(self, seg: SegmentMetadata, where: str) -> None:
        """The manifest describes the segment its metadata names (size, offsets, id)."""
        problems = []
        if self.original_size != seg.size:
            problems.append(f"its log is {self.original_size} bytes, the metadata says {seg.size}")
        if self.segment is not None:
            said = self.segment
            seg_id = said.get("remoteLogSegmentId", {}).get("id")
            if seg_id != seg.segment_id:
                problems.append(f"it names segment {seg_id}")
            if (said.get("startOffset"), said.get("endOffset")) != (seg.start_offset, seg.end_offset):
                problems.append(
                    f"its offsets are {said.get('startOffset')}-{said.get('endOffset')}, the "
                    f"metadata's {seg.start_offset}-{seg.end_offset}"
                )
        if problems:
            raise KafkaTierCorrupt(
                where,
                None,
                f"segment {seg.segment_id}: the manifest disagrees with the "
                "remote log metadata: " + "; ".join(problems),
            )

    def chunks_for(self, start: int, end: int) -> tuple[Chunk, ...]:
        """The chunks that hold bytes [start, end) of the original log."""
        return tuple(
            c
            for c in self.chunks
            if c.original_position < end and c.original_position + c.original_size > start
        )


def encode_chunk_sizes(sizes: list[int]) -> str:
    """The inverse of `_chunk_sizes`: the variable chunk index's `transformedChunks` value."""
    import zstandard

    raw = struct.pack(">i", len(sizes))
    if len(sizes) == 1:
        raw += struct.pack(">i", sizes[0])
    elif len(sizes) > 1:
        base = min(sizes[:-1])
        width = max(max(1, (v - base).bit_length() + 7 >> 3) for v in sizes[:-1])
        raw += struct.pack(">ib", base, width)
        raw += b"".join((v - base).to_bytes(width, "big") for v in sizes[:-1])
        raw += struct.pack(">i", sizes[-1])
    return base64.b64encode(zstandard.ZstdCompressor(write_content_size=True).compress(raw)).decode()


def _chunk_sizes(encoded: str) -> list[int]:
    import zstandard

    try:
        raw = zstandard.ZstdDecompressor().decompress(base64.b64decode(encoded))
    except zstandard.ZstdError as exc:
        raise ValueError(f"its chunk sizes do not decompress: {exc}") from None
    (count,) = struct.unpack_from(">i", raw, 0)
    if count <= 1:
        return [] if count == 0 else [struct.unpack_from(">i", raw, 4)[0]]
    base, width = struct.unpack_from(">ib", raw, 4)
    values = [
        int.from_bytes(raw[9 + i * width : 9 + (i + 1) * width], "big") + base for i in range(count - 1)
    ]
    return [*values, struct.unpack_from(">i", raw, 9 + (count - 1) * width)[0]]


def _chunks(index: dict[str, Any], where: str) -> tuple[Chunk, ...]:
    size, chunk = int(index["originalFileSize"]), int(index["originalChunkSize"])
    count = -(-size // chunk)
    if index["type"] == "fixed":
        transformed = [int(index["transformedChunkSize"])] * max(count - 1, 0)
        transformed += [int(index["finalTransformedChunkSize"])] if count else []
    elif index["type"] == "variable":
        transformed = _chunk_sizes(index["transformedChunks"])
    else:
        raise KafkaTierCorrupt(where, None, f"a chunk index of unknown type {index['type']!r}")
    if len(transformed) != count:
        raise KafkaTierCorrupt(
            where, None, f"{len(transformed)} chunks listed for {size} bytes in chunks of {chunk}"
        )
    out, position = [], 0
    for i, t in enumerate(transformed):
        out.append(Chunk(i * chunk, min(chunk, size - i * chunk), position, t))
        position += t
    return tuple(out)


_local = threading.local()


def _decompressor() -> Any:
    """This thread's zstd decompressor (one is not safe across threads; making one costs more than
    a chunk's decompression)."""
    import zstandard

    if not hasattr(_local, "zstd"):
        _local.zstd = zstandard.ZstdDecompressor()
    return _local.zstd


def custom_fields(custom: bytes | None) -> dict[int, Any]:
    """The plugin's custom metadata fields by tag (REMOTE_SIZE, OBJECT_PREFIX, OBJECT_KEY)."""
    if not custom:
        return {}
    fields: dict[int, Any] = {}
    for tag, raw in ProtocolReader(custom, flexible=True).tagged_fields().items():
        r = ProtocolReader(raw, flexible=True)
        fields[tag] = r.varlong() if tag == REMOTE_SIZE else r.string()
    return fields


def default_main_path(seg: SegmentMetadata) -> str:
    """`<topic>-<topic id>/<partition>/<20-digit start offset>-<segment id>`: the plugin's key of a
    segment's objects, without prefix and suffix, where its custom metadata names none."""
    start = f"{seg.start_offset:0{OFFSET_DIGITS}d}"
    return f"{seg.tp.topic}-{seg.tp.topic_id}/{seg.tp.partition}/{start}-{seg.segment_id}"


def object_key(seg: SegmentMetadata, prefix: str, suffix: str) -> str:
    """The key of one of the segment's objects, as the plugin named it."""
    fields = custom_fields(seg.custom_metadata)
    main = fields.get(OBJECT_KEY) or default_main_path(seg)
    return f"{fields.get(OBJECT_PREFIX, prefix) or ''}{main}.{suffix}"


class AivenSegment:
    """One remote segment's objects, read on demand: only the chunks a read needs are fetched and
    transformed back; the data key is unwrapped once."""

    def __init__(
        self, storage: Storage, root: str, seg: SegmentMetadata, prefix: str, keyring: Keyring
    ) -> None:
        self.storage = storage
        self.seg = seg
        self.paths = {s: f"{root.rstrip('/')}/{object_key(seg, prefix, s)}" for s in SUFFIXES}
        self.keyring = keyring
        self._manifest: AivenManifest | None = None
        self._key: bytes | None = None
        self._cipher: Any = None  # the segment's AES-GCM, keyed once

    def url(self, suffix: str) -> str:
        return self.storage.url(self.paths[suffix])

    def present(self) -> bool:
        return self.storage.is_file(self.paths["rsm-manifest"])

    def check(self) -> None:
        """The segment's manifest is there, parses, and describes the segment; its data key
        unwraps (once: what every later read of it uses)."""
        if self.manifest.wrapped_key is not None:
            self._data_key()

    @property
    def log_url(self) -> str:
        return self.url("log")

    def index_url(self, kind: str) -> str:
        return f"{self.url('indexes')}#{kind}"

    def index_size(self, kind: str) -> int | None:
        """The plain size of one of the segment's indexes (None where the plugin stored none)."""
        if kind not in self.manifest.indexes:
            return None
        size = self.manifest.indexes[kind][1]
        return size - IV_BYTES - TAG_BYTES if size and self.manifest.wrapped_key is not None else size

    @property
    def manifest(self) -> AivenManifest:
        if self._manifest is None:
            where = self.url("rsm-manifest")
            try:
                data = self.storage.read(self.paths["rsm-manifest"])
            except FileNotFoundError:
                raise KafkaTierCorrupt(
                    where, None, f"segment {self.seg.segment_id}: its manifest is missing"
                ) from None
            manifest = AivenManifest.parse(data, where)
            manifest.check(self.seg, where)
            self._manifest = manifest
        return self._manifest

    def _data_key(self) -> bytes:
        if self._key is None:
            assert self.manifest.wrapped_key is not None
            pair, wrapped = self.manifest.wrapped_key
            key = self.keyring.key(pair)
            if key is None:
                raise KafkaTierSettings(
                    f"segment {self.seg.segment_id} ({self.url('rsm-manifest')}): its data key is wrapped by "
                    f"key pair {pair!r}, which the settings do not configure "
                    f"(rsm.config.encryption.key.pairs.{pair}.private.key.file)"
                )
            unwrapped = key.unwrap(wrapped)
            if unwrapped is None or len(unwrapped) != 32:
                raise KafkaTierSettings(
                    f"segment {self.seg.segment_id} ({self.url('rsm-manifest')}): the private key of key "
                    f"pair {pair!r} ({self.keyring.files[pair]}) does not unwrap its data key: wrong key pair"
                )
            self._key = unwrapped
        return self._key

    def _read_object(self, suffix: str, start: int, end: int) -> bytes:
        where = self.url(suffix)
        try:
            data = self.storage.read(self.paths[suffix], start, end)
        except FileNotFoundError:
            raise KafkaTierCorrupt(
                where, None, f"segment {self.seg.segment_id}: the object is missing"
            ) from None
        if len(data) != end - start:
            raise KafkaTierCorrupt(
                where,
                start + len(data),
                f"segment {self.seg.segment_id}: the object ends "
                f"there, {end - start} bytes from byte {start} were wanted",
            )
        return data

    def _decrypt(self, data: bytes, suffix: str, position: int) -> bytes:
        if self.manifest.wrapped_key is None:
            return data
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if self._cipher is None:
            self._cipher = AESGCM(self._data_key())
        try:
            return bytes(self._cipher.decrypt(data[:IV_BYTES], data[IV_BYTES:], self.manifest.aad))
        except (InvalidTag, ValueError):
            raise KafkaTierCorrupt(
                self.url(suffix),
                position,
                f"segment {self.seg.segment_id}: a chunk of "
                f"{len(data)} bytes fails its AES-GCM authentication (damaged)",
            ) from None

    def read_log(self, start: int = 0, end: int | None = None) -> bytes:
        """Bytes [start, end) of the segment's log, from the chunks that hold them."""
        manifest = self.manifest
        end = manifest.original_size if end is None else min(end, manifest.original_size)
        chunks = manifest.chunks_for(start, end)
        if not chunks:
            return b""
        first = chunks[0]
        out = b"".join(self._plain_chunks(chunks))
        return out[start - first.original_position : end - first.original_position]

    def log_chunks(self) -> Iterator[bytes]:
        """The whole log, chunk by chunk, fetched a few chunks per ranged read (never held whole)."""
        chunks = self.manifest.chunks_for(0, self.manifest.original_size)
        group: list[Chunk] = []
        for c in chunks:
            group.append(c)
            if c.transformed_position + c.transformed_size - group[0].transformed_position >= FETCH_BYTES:
                yield from self._plain_chunks(tuple(group))
                group = []
        if group:
            yield from self._plain_chunks(tuple(group))

    def _plain_chunks(self, chunks: tuple[Chunk, ...]) -> Iterator[bytes]:
        """Consecutive chunks, read in one ranged read and transformed back, each checked to hold
        the bytes the manifest says."""
        manifest = self.manifest
        first, last = chunks[0], chunks[-1]
        data = self._read_object(
            "log", first.transformed_position, last.transformed_position + last.transformed_size
        )
        for c in chunks:
            at = c.transformed_position - first.transformed_position
            plain = self._decrypt(data[at : at + c.transformed_size], "log", c.transformed_position)
            if manifest.compressed:
                plain = self._decompress(plain, c)
            if len(plain) != c.original_size:
                raise KafkaTierCorrupt(
                    self.url("log"),
                    c.transformed_position,
                    f"segment {self.seg.segment_id}: "
                    f"a chunk holds {len(plain)} bytes, the manifest says {c.original_size}",
                )
            yield plain

    def read_log_array(self) -> np.ndarray:
        return np.frombuffer(self.read_log(), dtype=np.uint8)  # chunks decrypted: held whole

    def _decompress(self, data: bytes, c: Chunk) -> bytes:
        import zstandard

        try:
            return bytes(_decompressor().decompress(data, max_output_size=c.original_size))
        except zstandard.ZstdError as exc:
            raise KafkaTierCorrupt(
                self.url("log"),
                c.transformed_position,
                f"segment {self.seg.segment_id}: a chunk does not decompress (zstd): {exc}",
            ) from None

    def index(self, kind: str) -> bytes | None:
        """One of the segment's indexes (Kafka's suffix: index, timeindex, snapshot, txnindex,
        leader-epoch), None where the plugin stored none."""
        if kind not in self.manifest.indexes:
            return None
        position, size = self.manifest.indexes[kind]
        if size == 0:
            return b""
        return self._decrypt(self._read_object("indexes", position, position + size), "indexes", position)
