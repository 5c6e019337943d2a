"""A Parquet or CSV key list's `key` column: read whole or in batches (a Parquet row group, a CSV
block), and turned into the keys' bytes (a binary column as it is, a string column read in the
key format)."""

from __future__ import annotations

import binascii
import io
from collections.abc import Iterator

import pyarrow as pa

from pipelines.config.key_formats import decode_key
from pipelines.errors import ConfigError
from pipelines.keys.key_set import ErasedKeys
from segment_io.storage.base import Storage
from segment_io.storage.ranged_file import StorageFile

KEY_COLUMN = "key"


def parquet_column(raw: bytes, url: str) -> pa.Array:
    """A Parquet list's key column, read whole from its bytes."""
    import pyarrow.parquet as pq

    try:
        # ParquetFile, not read_table: that one imports pyarrow.dataset (a third of a second).
        return pq.ParquetFile(io.BytesIO(raw)).read(columns=[KEY_COLUMN]).column(KEY_COLUMN)
    except pa.ArrowException as exc:
        raise ConfigError(f"--keys {url}: not a Parquet file: {exc}") from None


def csv_column(raw: bytes, url: str) -> pa.Array:
    """A CSV list's key column, read whole from its bytes."""
    import pyarrow.csv as pcsv

    try:
        table = pcsv.read_csv(io.BytesIO(raw), convert_options=csv_options())
    except pa.ArrowException as exc:
        raise ConfigError(f"--keys {url}: not a CSV file with a header line: {exc}") from None
    if KEY_COLUMN not in table.column_names:
        raise ConfigError(f"--keys {url}: no {KEY_COLUMN!r} column (it has {', '.join(table.column_names)})")
    return table.column(KEY_COLUMN)


def parquet_columns(storage: Storage, path: str, size: int) -> Iterator[pa.Array]:
    """A Parquet list's key column, a row group at a time."""
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(StorageFile(storage, path, size))
    for group in range(parquet.metadata.num_row_groups):
        yield parquet.read_row_group(group, columns=[KEY_COLUMN]).column(KEY_COLUMN).combine_chunks()


def csv_columns(handle: StorageFile) -> Iterator[pa.Array]:
    """A CSV list's key column, a block at a time."""
    import pyarrow.csv as pcsv

    for batch in pcsv.open_csv(handle, convert_options=csv_options()):
        yield batch.column(KEY_COLUMN)


def csv_options() -> object:
    """Keys as strings, an empty field an empty key (never a null)."""
    import pyarrow.csv as pcsv

    return pcsv.ConvertOptions(column_types={KEY_COLUMN: pa.string()}, strings_can_be_null=False)


def column_array(column: pa.Array, url: str, key_format: str) -> pa.Array:
    """A key column as binary keys: a binary column as it is; a string column decoded from the key
    format (utf8: its bytes); nulls left out (no record carries a null key that a list names)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
        return column.drop_null().cast(pa.large_binary())
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        raise ConfigError(f"--keys {url}: the {KEY_COLUMN!r} column is {column.type}, not binary or string")
    if key_format == "utf8":
        return column.drop_null().cast(pa.large_string()).cast(pa.large_binary())
    texts = [t for t in column.to_pylist() if t is not None]
    try:
        return pa.array([decode_key(t.encode(), key_format) for t in texts], pa.large_binary())
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise ConfigError(f"--keys {url}: a {KEY_COLUMN!r} value is not {key_format}: {exc}") from None


def column_keys(column: pa.Array, url: str, key_format: str) -> ErasedKeys:
    """A whole key column's distinct keys."""
    return ErasedKeys.from_arrow(column_array(column, url, key_format))
