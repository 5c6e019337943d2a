"""The keys an erase removes: read from a list file, held as an exact-key hash table (the key
map's, keytable.LatestOffsets: equality is decided on the key bytes, never on a hash alone), and
matched against a chunk of framed records in one kernel call per chunk (no object per record).

A list file is one key per line (`--key-format` utf8, hex or base64; blank lines are skipped and a
line ending may be CRLF), or a Parquet or CSV file with a `key` column (a binary column holds the
keys' bytes; a string column is read in the key format)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pipelines.config.key_formats import KEY_FORMATS
from pipelines.errors import ConfigError
from pipelines.log.keytable import EMPTY, KeyRows, LatestOffsets, hash_keys
from segment_io.format import records as rec
from segment_io.segment.framing import Framed
from segment_io.storage import open_storage

KEY_COLUMN = "key"
DIGEST = "sha256"  # the evidence names a key by this digest of its bytes, never by the key


def _key_rows(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> KeyRows:
    """Rows of the keys `data[starts[i]:+lengths[i]]` as the table takes them (one partition, 0)."""
    tps = np.zeros(len(starts), dtype=np.int32)
    offsets = np.arange(len(starts), dtype=np.int64)
    return KeyRows(tps, hash_keys(tps, data, starts, lengths), data, starts, lengths, offsets)


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
        array = array.drop_null().cast(pa.large_binary())
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        offsets = np.frombuffer(array.buffers()[1], dtype=np.int64)[
            array.offset : array.offset + len(array) + 1
        ]
        data_buffer = array.buffers()[2]
        data = (
            np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
        )
        starts = offsets[:-1].copy()
        lengths = np.diff(offsets)
        table = LatestOffsets()
        # A key listed twice keeps its first entry: offsets are list positions, inserted in order,
        # and an entry's number is the order of first insertion.
        table.add(_key_rows(data, starts, lengths))
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

    def digests(self) -> list[str]:
        """The SHA-256 (hex) of every entry's key bytes, by entry."""
        rows = self.table.rows()
        data = rows.data.tobytes()
        return [
            hashlib.sha256(data[s : s + n]).hexdigest()
            for s, n in zip(rows.starts.tolist(), rows.lengths.tolist(), strict=True)
        ]


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


def read_key_list(url: str, key_format: str = "utf8") -> ErasedKeys:
    """The keys of a list file (see the module's docstring); an empty list is refused."""
    if key_format not in KEY_FORMATS:
        raise ConfigError(f"--key-format {key_format!r}: expected one of {', '.join(KEY_FORMATS)}")
    storage, path = open_storage(url)
    if not storage.exists(path):
        raise ConfigError(f"--keys {url}: no such file")
    raw = storage.read(path)
    lowered = path.lower()
    if lowered.endswith(".parquet"):
        keys = _column_keys(_parquet_column(raw, url), url, key_format)
    elif lowered.endswith(".csv"):
        keys = _column_keys(_csv_column(raw, url), url, key_format)
    else:
        keys = ErasedKeys.of(_line_keys(raw, url, key_format))
    if len(keys) == 0:
        raise ConfigError(f"--keys {url}: the list holds no key; an erase of nothing is refused")
    return keys


def _decode(text: bytes, key_format: str) -> bytes:
    if key_format == "hex":
        return bytes.fromhex(text.decode("ascii"))
    if key_format == "base64":
        return base64.b64decode(text, validate=True)
    return text


def _line_keys(raw: bytes, url: str, key_format: str) -> list[bytes]:
    keys = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        line = line.removesuffix(b"\r")
        if not line:
            continue
        try:
            keys.append(_decode(line, key_format))
        except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
            raise ConfigError(f"--keys {url}, line {number}: not {key_format}: {exc}") from None
    return keys


def _parquet_column(raw: bytes, url: str) -> pa.Array:
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(io.BytesIO(raw))
    except pa.ArrowException as exc:
        raise ConfigError(f"--keys {url}: not a Parquet file: {exc}") from None
    if KEY_COLUMN not in schema.names:
        raise ConfigError(f"--keys {url}: no {KEY_COLUMN!r} column (it has {', '.join(schema.names)})")
    return pq.read_table(io.BytesIO(raw), columns=[KEY_COLUMN]).column(KEY_COLUMN)


def _csv_column(raw: bytes, url: str) -> pa.Array:
    import pyarrow.csv as pcsv

    try:
        table = pcsv.read_csv(
            io.BytesIO(raw),
            convert_options=pcsv.ConvertOptions(
                column_types={KEY_COLUMN: pa.string()}, strings_can_be_null=False
            ),
        )
    except pa.ArrowException as exc:
        raise ConfigError(f"--keys {url}: not a CSV file with a header line: {exc}") from None
    if KEY_COLUMN not in table.column_names:
        raise ConfigError(f"--keys {url}: no {KEY_COLUMN!r} column (it has {', '.join(table.column_names)})")
    return table.column(KEY_COLUMN)


def _column_keys(column: pa.Array, url: str, key_format: str) -> ErasedKeys:
    """A binary column as it is; a string column decoded from the key format (utf8: its bytes)."""
    if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
        return ErasedKeys.from_arrow(column)
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        raise ConfigError(f"--keys {url}: the {KEY_COLUMN!r} column is {column.type}, not binary or string")
    if key_format == "utf8":
        return ErasedKeys.from_arrow(column.cast(pa.large_string()).cast(pa.large_binary()))
    texts = [t for t in column.to_pylist() if t is not None]
    try:
        return ErasedKeys.of([_decode(t.encode(), key_format) for t in texts])
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise ConfigError(f"--keys {url}: a {KEY_COLUMN!r} value is not {key_format}: {exc}") from None
