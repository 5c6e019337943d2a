"""The keys an erase removes (read from a list file: keys/key_list.py), held as an exact-key
hash table (the key map's, keytable.LatestOffsets: equality is decided on the key bytes, never on
a hash alone), and matched against a chunk of framed records in one kernel call per chunk (no
object per record)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pipelines.keys.key_digest import KeyDigest
from pipelines.log.keytable import EMPTY, KeyRows, LatestOffsets, hash_keys
from segment_io.format import records as rec
from segment_io.segment.framing import Framed


def _key_rows(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> KeyRows:
    """Rows of the keys `data[starts[i]:+lengths[i]]` as the table takes them (one partition, 0)."""
    tps = np.zeros(len(starts), dtype=np.int32)
    offsets = np.arange(len(starts), dtype=np.int64)
    return KeyRows(tps, hash_keys(tps, data, starts, lengths), data, starts, lengths, offsets)


def key_rows(array: pa.Array) -> KeyRows:
    """Rows of the keys of a binary Arrow array, nulls left out, in order (one partition, 0)."""
    array = array.drop_null().cast(pa.large_binary())
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int64)[array.offset : array.offset + len(array) + 1]
    data_buffer = array.buffers()[2]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    return _key_rows(data, offsets[:-1].copy(), np.diff(offsets))


@dataclass(frozen=True)
class ErasedKeys:
    """A set of distinct keys; entry i is the i-th distinct key of the list, in list order."""

    table: LatestOffsets

    @classmethod
    def of(cls, keys: Sequence[bytes]) -> ErasedKeys:
        array = pa.array(keys, pa.binary())
        return cls.from_arrow(array)

    @classmethod
    def from_arrow(cls, array: pa.Array) -> ErasedKeys:
        """The keys of a binary Arrow array (nulls are not keys a record can carry: left out)."""
        return cls.from_rows(key_rows(array))

    @classmethod
    def from_rows(cls, rows: KeyRows) -> ErasedKeys:
        """The distinct keys of rows hashed as one partition's (partition 0), in row order."""
        table = LatestOffsets()
        # A key listed twice keeps its first entry: an entry's number is the order of first
        # insertion, whatever the rows' offsets.
        table.add(rows)
        return cls(table)

    def __len__(self) -> int:
        return len(self.table)

    def entries_of(self, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """The entry of each key `data[starts[i]:+lengths[i]]` (a null key, length −1, has none):
        EMPTY (−1) for a key not in the set."""
        out = np.full(len(starts), EMPTY, dtype=np.int64)
        present = np.flatnonzero(lengths >= 0)
        if len(present) and len(self.table):
            rows = _key_rows(data, starts[present], lengths[present])
            out[present] = self.table.entries(rows)
        return out

    def key(self, entry: int) -> bytes:
        rows = self.table.rows()
        start, length = int(rows.starts[entry]), int(rows.lengths[entry])
        return rows.data[start : start + length].tobytes()

    def digests(self, digest: KeyDigest, entries: np.ndarray | None = None) -> list[str]:
        """The digest (hex) of the key bytes of every entry, by entry (or of `entries`)."""
        rows = self.table.rows()
        if entries is None:
            return digest.hex(rows.data, rows.starts, rows.lengths)
        return digest.hex(rows.data, rows.starts[entries], rows.lengths[entries])


@dataclass(frozen=True)
class HeaderValues:
    """The values of the named headers of some framed records: per value its record (an index
    into the framing), its header's place in that record, and where its bytes lie (never null)."""

    owner: np.ndarray
    place: np.ndarray
    start: np.ndarray
    length: np.ndarray


def named_header_values(framed: Framed, records: np.ndarray, header_names: ErasedKeys) -> HeaderValues:
    """The non-null values of the headers of `records` whose names `header_names` holds."""
    data = framed.sections.data
    counts = framed.header_count[records]
    n = int(counts.sum())
    hk_start, hk_len, hv_start, hv_len = (np.empty(n, dtype=np.int64) for _ in range(4))
    rec.parse_headers(data, framed.header_start[records], counts, hk_start, hk_len, hv_start, hv_len)
    owner = np.repeat(records, counts)
    place = np.arange(n) - np.repeat(np.cumsum(counts) - counts, counts)
    named = np.flatnonzero((header_names.entries_of(data, hk_start, hk_len) != EMPTY) & (hv_len >= 0))
    return HeaderValues(owner[named], place[named], hv_start[named], hv_len[named])


def matched_entries(framed: Framed, keys: ErasedKeys, header_names: ErasedKeys | None) -> np.ndarray:
    """Per framed record, the entry of the listed key it carries (its own key first, then the value
    of a header named in `header_names`), EMPTY when it carries none: the records an erase removes."""
    data = framed.sections.data
    entries = keys.entries_of(data, framed.key_start, framed.key_len)
    if header_names is None or len(header_names) == 0:
        return entries
    with_headers = np.flatnonzero((entries == EMPTY) & (framed.header_count > 0))
    if len(with_headers) == 0:
        return entries
    values = named_header_values(framed, with_headers, header_names)
    found = keys.entries_of(data, values.start, values.length)
    hit = found != EMPTY
    # Reversed, so that a record's first matching header is the one written last (and kept).
    entries[values.owner[hit][::-1]] = found[hit][::-1]
    return entries
    with_headers = np.flatnonzero((entries == EMPTY) & (framed.header_count > 0))
    if len(with_headers) == 0:
        return entries
    counts = framed.header_count[with_headers]
    n = int(counts.sum())
    hk_start, hk_len, hv_start, hv_len = (np.empty(n, dtype=np.int64) for _ in range(4))
    rec.parse_headers(data, framed.header_start[with_headers], counts, hk_start, hk_len, hv_start, hv_len)
    owner = np.repeat(with_headers, counts)
    named = header_names.entries_of(data, hk_start, hk_len) != EMPTY
    found = keys.entries_of(data, hv_start[named], hv_len[named])
    hit = found != EMPTY
    # Reversed, so that a record's first matching header is the one written last (and kept).
    entries[owner[named][hit][::-1]] = found[hit][::-1]
    return entries
