"""An erase's key list file: checked before anything runs, then read whole (a list small enough to
travel with every task) or in parts, each read by a task of the key join (jobs/erase/join.py).

A list file is one key per line (`--key-format` utf8, hex or base64; blank lines are skipped and a
line ending may be CRLF), or a Parquet or CSV file with a `key` column (a binary column holds the
keys' bytes; a string column is read in the key format). A line belongs to the part in which it
starts, so parts split a file anywhere and still read every line once."""

from __future__ import annotations

import binascii
import itertools
import posixpath
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from pipelines.config.key_formats import KEY_FORMATS, decode_key
from pipelines.config.tuning import KEY_BROADCAST, tuned
from pipelines.errors import ConfigError
from pipelines.keys.key_columns import (
    KEY_COLUMN,
    column_array,
    column_keys,
    csv_column,
    csv_columns,
    csv_options,
    parquet_column,
    parquet_columns,
)
from pipelines.keys.key_notes import (
    PADDED_SHOWN,
    SAMPLED,
    KeyListNotes,
    byte_order_mark,
    column_notes,
    padded_positions,
)
from pipelines.keys.key_set import ErasedKeys
from segment_io.format.records import gather
from segment_io.storage import open_storage
from segment_io.storage.base import Storage
from segment_io.storage.ranged_file import StorageFile


# A key list of up to this many bytes (its file, or a Parquet key column's uncompressed bytes) is
# read whole and travels with every task; a larger one is joined with the records' keys through
# the run's flow, so no task and not the driver holds more than its share (jobs/erase/join.py).
# The tuning setting key.broadcast.bytes (SEGPIPE_KEY_BROADCAST_BYTES; config/tuning.py; 0: every
# list is joined). Measured on the 4 GB bench set (2 cores, whole process, 16-byte keys): 1 M keys
# 12.3 s read whole against 15.0 s joined; 5 M keys 25.0 s (3.9 GiB) against 17.9 s (1.9 GiB);
# 20 M keys 85 s (12 GiB) against 28.8 s (2.6 GiB).
def key_broadcast_bytes() -> int:
    """How large a key list is read whole and handed to every task."""
    return int(tuned(KEY_BROADCAST))


# Parts of a line list read at most this many bytes at once (a task's memory stays bounded).
LINE_READ_BYTES = 64 * 2**20

LINES, PARQUET, CSV = "lines", "parquet", "csv"


@dataclass(frozen=True)
class KeyList:
    """A key list file, checked: it exists, its key format is known, a Parquet or CSV file has a
    `key` column. `size`: what its keys weigh, as key.broadcast.bytes counts it."""

    url: str
    key_format: str
    kind: str
    size: int
    size_on_disk: int
    row_groups: int  # a Parquet file's (0 for the others)
    # A line list's leading byte-order mark, skipped by every read (key_notes.byte_order_mark).
    skip: int = 0
    notes: KeyListNotes = field(default_factory=KeyListNotes)

    def warnings(self) -> list[str]:
        """What an operator should hear of the list before it is used."""
        return self.notes.lines(self.url, self.key_format, "line" if self.kind == LINES else "row")

    @classmethod
    def open(cls, url: str, key_format: str = "utf8") -> KeyList:
        if key_format not in KEY_FORMATS:
            raise ConfigError(f"--key-format {key_format!r}: expected one of {', '.join(KEY_FORMATS)}")
        storage, path = open_storage(url)
        listed = {f.name: f for f in storage.list(posixpath.dirname(path))} if storage.is_file(path) else {}
        info = listed.get(posixpath.basename(path))
        if info is None:
            raise ConfigError(f"--keys {url}: no such file")
        lowered = path.lower()
        if lowered.endswith(".parquet"):
            import pyarrow.parquet as pq

            try:  # only the footer is read
                meta = pq.ParquetFile(StorageFile(storage, path, info.size)).metadata
            except (pa.ArrowException, OSError) as exc:
                raise ConfigError(f"--keys {url}: not a Parquet file: {exc}") from None
            names = meta.schema.names
            if KEY_COLUMN not in names:
                raise ConfigError(f"--keys {url}: no {KEY_COLUMN!r} column (it has {', '.join(names)})")
            column = names.index(KEY_COLUMN)
            size = sum(
                meta.row_group(g).column(column).total_uncompressed_size for g in range(meta.num_row_groups)
            )
            notes = column_notes(parquet_columns(storage, path, info.size))
            return cls(url, key_format, PARQUET, size, info.size, meta.num_row_groups, notes=notes)
        if lowered.endswith(".csv"):
            import pyarrow.csv as pcsv

            try:  # only the first block is read
                names = pcsv.open_csv(
                    StorageFile(storage, path, info.size), convert_options=csv_options()
                ).schema.names
            except pa.ArrowException as exc:
                raise ConfigError(f"--keys {url}: not a CSV file with a header line: {exc}") from None
            if KEY_COLUMN not in names:
                raise ConfigError(f"--keys {url}: no {KEY_COLUMN!r} column (it has {', '.join(names)})")
            try:
                notes = column_notes(csv_columns(StorageFile(storage, path, info.size)))
            except pa.ArrowException as exc:
                raise ConfigError(f"--keys {url}: not a readable {CSV} key list: {exc}") from None
            return cls(url, key_format, CSV, info.size, info.size, 0, notes=notes)
        skip = byte_order_mark(url, storage.read(path, 0, min(info.size, 4)))
        padded, first = _padded_lines(storage, path, info.size, skip)
        notes = KeyListNotes(bool(skip), padded, first)
        return cls(url, key_format, LINES, info.size - skip, info.size, 0, skip, notes)

    @property
    def broadcast(self) -> bool:
        """Whether the list is read whole and handed to every task (else it is joined)."""
        return self.size <= key_broadcast_bytes()

    def read(self) -> ErasedKeys:
        """The whole list's distinct keys; an empty list is refused."""
        storage, path = open_storage(self.url)
        raw = storage.read(path)
        if self.kind == PARQUET:
            keys = column_keys(parquet_column(raw, self.url), self.url, self.key_format)
        elif self.kind == CSV:
            keys = column_keys(csv_column(raw, self.url), self.url, self.key_format)
        else:
            keys = ErasedKeys.from_arrow(_line_array(raw[self.skip :], self.url, self.key_format, self.skip))
        if len(keys) == 0:
            raise refused_empty(self.url)
        return keys

    def samples(self) -> list[bytes]:
        """The list's first keys as written (before their key format is read; a binary column's
        keys as they are), for a hint of what the keys look like."""
        storage, path = open_storage(self.url)
        if self.kind == LINES:
            head = storage.read(path, self.skip, min(self.size_on_disk, self.skip + 2**16))
            lines = (line.removesuffix(b"\r") for line in head.split(b"\n")[:-1] or [head])
            return [line for line in lines if line][:SAMPLED]
        with StorageFile(storage, path, self.size_on_disk) as handle:
            if self.kind == PARQUET:
                columns = parquet_columns(storage, path, self.size_on_disk)
            else:
                columns = csv_columns(handle)
            column = next(iter(columns), pa.array([], pa.binary())).slice(0, SAMPLED).drop_null()
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            return [text.encode() for text in column.to_pylist()]
        return []

    def parts(self, count: int) -> list[KeyListPart]:
        """The list in about `count` parts for the join's tasks: byte ranges of a line list, row
        groups of a Parquet file; a CSV file (whose quoting a byte range cannot split) is one
        part, read in batches."""
        if self.kind == PARQUET:
            bounds = np.linspace(0, self.row_groups, min(count, self.row_groups) + 1).astype(int)
        elif self.kind == LINES:
            bounds = np.linspace(
                self.skip, self.size_on_disk, max(1, min(count, self.size // 2**20)) + 1
            ).astype(int)
        else:
            bounds = np.array([0, 1])
        return [KeyListPart(self, int(lo), int(hi)) for lo, hi in itertools.pairwise(bounds.tolist())]


@dataclass(frozen=True)
class KeyListPart:
    """Bytes [lo, hi) of a line list (the lines that start there), row groups [lo, hi) of a
    Parquet list, or a whole CSV list."""

    keys: KeyList
    lo: int
    hi: int

    def read(self) -> Iterator[pa.Array]:
        """Executed on a worker: the part's keys, as binary arrays of bounded size."""
        keys = self.keys
        storage, path = open_storage(keys.url)
        if keys.kind == LINES:
            yield from self._lines(storage, path)
            return
        with StorageFile(storage, path, keys.size_on_disk) as handle:
            try:
                for column in self._columns(handle):
                    yield column_array(column, keys.url, keys.key_format)
            except pa.ArrowException as exc:  # a row or row group its reader cannot read
                raise ConfigError(f"--keys {keys.url}: not a readable {keys.kind} key list: {exc}") from None

    def _columns(self, handle: StorageFile) -> Iterator[pa.Array]:
        """The key column of a Parquet part's row groups, or of a CSV list's batches."""
        if self.keys.kind == PARQUET:
            import pyarrow.parquet as pq

            parquet = pq.ParquetFile(handle)
            for group in range(self.lo, self.hi):
                yield parquet.read_row_group(group, columns=[KEY_COLUMN]).column(KEY_COLUMN)
        else:
            yield from csv_columns(handle)

    def _lines(self, storage: Storage, path: str) -> Iterator[pa.Array]:
        """The keys of the lines that start in [lo, hi), read LINE_READ_BYTES at a time (a longer
        line is read to its end)."""
        size, url, key_format = self.keys.size_on_disk, self.keys.url, self.keys.key_format
        start = self._first_line(storage, path)
        while start < self.hi:
            end = min(size, start + LINE_READ_BYTES)
            chunk = storage.read(path, start, end)
            cut = chunk.rfind(b"\n") + 1
            while cut == 0 and end < size:  # one line longer than a read
                more = storage.read(path, end, min(size, end + LINE_READ_BYTES))
                chunk, end = chunk + more, end + len(more)
                cut = chunk.rfind(b"\n") + 1
            lines = chunk if end == size else chunk[:cut]  # the file's last line may lack its newline
            if start + len(lines) > self.hi:  # lines starting at hi or later are the next part's
                newline = lines.find(b"\n", self.hi - 1 - start)
                lines = lines[: newline + 1] if newline >= 0 else lines
            yield _line_array(lines, url, key_format, start)
            start += len(lines)

    def _first_line(self, storage: Storage, path: str) -> int:
        """Where the first line starting at `lo` or later starts (a line that starts before `lo`
        is the previous part's)."""
        if self.lo <= self.keys.skip:
            return self.keys.skip
        size, at = self.keys.size_on_disk, self.lo - 1
        while at < size:
            chunk = storage.read(path, at, min(size, at + LINE_READ_BYTES))
            newline = chunk.find(b"\n")
            if newline >= 0:
                return at + newline + 1
            at += len(chunk)
        return size


def refused_empty(url: str) -> ConfigError:
    return ConfigError(f"--keys {url}: the list holds no key; an erase of nothing is refused")


def checked_key_list(
    url: str, key_format: str = "utf8", log: Callable[[str], Any] | None = None
) -> ErasedKeys | KeyList:
    """The list read whole where it travels whole (a bad line or an empty list refused now), or
    the list to join, checked as far as it can be unread (its parts' readers refuse a bad line,
    the join an empty list); its warnings go to `log`."""
    key_list = KeyList.open(url, key_format)
    if log is not None:
        for line in key_list.warnings():
            log(line)
    return key_list.read() if key_list.broadcast else key_list


def read_key_list(url: str, key_format: str = "utf8") -> ErasedKeys:
    """The keys of a list file (see the module's docstring), read whole; an empty list is refused."""
    return KeyList.open(url, key_format).read()


def _line_bounds(buffer: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each line of `buffer` starts and ends (its newline and a CR before it left out)."""
    if not len(buffer):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    newlines = np.flatnonzero(buffer == 10)
    ends = np.append(newlines, len(buffer)) if buffer[-1] != 10 else newlines
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
    ends = ends.astype(np.int64)
    crlf = (ends > starts) & (buffer[np.maximum(ends - 1, 0)] == 13)
    return starts, ends - crlf


def _padded_lines(storage: Storage, path: str, size: int, at: int) -> tuple[int, tuple[int, ...]]:
    """How many lines of a line list (from byte `at`) begin or end with a space or a tab, and the
    first few of them (1-based line numbers), read LINE_READ_BYTES at a time."""
    count, line = 0, 1
    first: list[int] = []
    while at < size:
        chunk = storage.read(path, at, min(size, at + LINE_READ_BYTES))
        cut = len(chunk) if at + len(chunk) >= size else chunk.rfind(b"\n") + 1
        if cut == 0:  # a line longer than a read: read on to its end
            cut = len(chunk)
        buffer = np.frombuffer(chunk[:cut], dtype=np.uint8)
        starts, ends = _line_bounds(buffer)
        padded = padded_positions(starts, ends, buffer)
        count += len(padded)
        first += (padded[: PADDED_SHOWN - len(first)] + line).tolist() if len(first) < PADDED_SHOWN else []
        line += len(starts)
        at += cut
    return count, tuple(first)


def _line_array(raw: bytes, url: str, key_format: str, position: int = 0) -> pa.Array:
    """The keys of whole lines `raw` (from byte `position` of the list), as a binary array."""
    buffer = np.frombuffer(raw, dtype=np.uint8)
    starts, ends = _line_bounds(buffer)
    kept = np.flatnonzero(ends > starts)  # blank lines are skipped
    if key_format == "utf8":
        lengths = ends[kept] - starts[kept]
        offsets, data = gather(buffer, starts[kept], lengths)
        buffers = [None, pa.py_buffer(offsets.astype(np.int64)), pa.py_buffer(data)]
        return pa.Array.from_buffers(pa.large_binary(), len(kept), buffers)
    keys = []
    for s, e in zip(starts[kept].tolist(), ends[kept].tolist(), strict=True):
        try:
            keys.append(decode_key(raw[s:e], key_format))
        except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
            raise ConfigError(f"--keys {url}, at byte {position + s}: not {key_format}: {exc}") from None
    return pa.array(keys, pa.large_binary())
