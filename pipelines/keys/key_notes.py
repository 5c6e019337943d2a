"""What an operator is told of a key list before and after it is used: the byte-order mark taken
off (and the UTF-16/32 lists refused), keys that begin or end with whitespace, null keys left out,
and, where a run found none of the listed keys, what the keys look like and the key format they
were read in. A note says what was done, so that what a run erased is never a surprise."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.errors import ConfigError
from segment_io.text import counted

# A text file's byte-order marks (the 4-byte ones first: UTF-32 LE starts as UTF-16 LE does).
UTF8_BOM = b"\xef\xbb\xbf"
WIDE_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32 LE"),
    (b"\x00\x00\xfe\xff", "UTF-32 BE"),
    (b"\xff\xfe", "UTF-16 LE"),
    (b"\xfe\xff", "UTF-16 BE"),
)


def byte_order_mark(url: str, head: bytes) -> int:
    """How many bytes of a line list's start are a UTF-8 byte-order mark (what Windows editors
    write; no key starts with it); a UTF-16 or UTF-32 list, whose keys are not their file's bytes,
    is refused naming its encoding."""
    for mark, encoding in WIDE_BOMS:
        if head.startswith(mark):
            raise ConfigError(
                f"--keys {url}: the file is {encoding} text (its byte-order mark says so); a line list "
                "is read as bytes per line: save it as UTF-8"
            )
    return len(UTF8_BOM) if head.startswith(UTF8_BOM) else 0


PADDED_SHOWN = 5  # the line or row numbers a note of padded keys names


@dataclass(frozen=True)
class KeyListNotes:
    """What was found in a key list as it was checked: a UTF-8 byte-order mark, keys that begin
    or end with a space or a tab (how many, and the first few by 1-based line or row number), and
    null keys of a Parquet or CSV column."""

    byte_order_mark: bool = False
    padded: int = 0
    padded_first: tuple[int, ...] = ()
    nulls: int = 0

    def lines(self, url: str, key_format: str, rows: str) -> list[str]:
        """The notes and warnings to print; `rows` names the list's units ("line" or "row")."""
        said = []
        if self.byte_order_mark:
            said.append(
                f"segpipe: note: --keys {url}: starts with a UTF-8 byte-order mark; it was taken off "
                "(it is not part of the first key)"
            )
        if self.padded:
            shown = ", ".join(str(n) for n in self.padded_first)
            more = ", ..." if self.padded > len(self.padded_first) else ""
            verb = "begins or ends" if self.padded == 1 else "begin or end"
            said.append(
                f"segpipe: warning: --keys {url}: {counted(self.padded, rows)} {verb} with a space "
                f"or a tab ({rows} {shown}{more}); {PADDING_RULES[key_format]}"
            )
        if self.nulls:
            said.append(
                f"segpipe: warning: --keys {url}: {counted(self.nulls, 'null key')} left out (a record's "
                "null key is no key a list can name; an empty key is a key)"
            )
        return said


# What becomes of a key's leading or trailing whitespace, by key format.
PADDING_RULES = {
    "utf8": "the whitespace is part of the key, so such a key matches only a record whose key carries it too",
    "hex": "the whitespace is not part of the key: hex keys are read without their spaces and tabs",
    "base64": "base64 has no whitespace: such a key is refused when the list is read",
}


def padded_positions(starts: np.ndarray, ends: np.ndarray, buffer: np.ndarray) -> np.ndarray:
    """Which of the non-empty lines [starts, ends) of `buffer` begin or end with a space or a tab
    (indexes into starts)."""
    full = ends > starts
    blank = np.isin(buffer[starts[full]], (9, 32)) | np.isin(buffer[ends[full] - 1], (9, 32))
    return np.flatnonzero(full)[blank]


def column_notes(columns: Iterable[pa.Array]) -> KeyListNotes:
    """The notes of a Parquet or CSV key column read batch by batch: its null keys, and its string
    keys that begin or end with a space or a tab (by 1-based row number)."""
    nulls = padded = row = 0
    first: list[int] = []
    for column in columns:
        nulls += column.null_count
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            hits = pc.fill_null(pc.match_substring_regex(column, r"^[ \t]|[ \t]$"), False)
            at = np.flatnonzero(hits.to_numpy(zero_copy_only=False))
            padded += len(at)
            first += (at[: PADDED_SHOWN - len(first)] + row + 1).tolist() if len(first) < PADDED_SHOWN else []
        row += len(column)
    return KeyListNotes(padded=padded, padded_first=tuple(first), nulls=nulls)


SAMPLED = 200  # the listed keys a format hint looks at
HEX = re.compile(rb"(?:[0-9a-fA-F]{2})+")
BASE64 = re.compile(rb"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")


def nowhere_warning(listed: int, key_format: str, samples: list[bytes]) -> str:
    """The warning of a run that found none of its `listed` keys: the key format they were read
    in, what they look like (a format they would fit better, where `samples`, the list's first keys
    as written, all fit one), so a list in the wrong format is not taken for an erasure of nothing."""
    shown = samples[0][:40].decode("utf-8", "backslashreplace") if samples else ""
    guess = _looks_like(samples)
    said = f"segpipe: warning: none of the {listed:,} listed keys was found"
    said += f" (read as --key-format {key_format})"
    if guess is not None and guess != key_format:
        return f"{said}: all of them look like {guess} (e.g. {shown!r}): did you mean --key-format {guess}?"
    example = f" (e.g. {shown!r})" if samples else ""
    return f"{said}{example}: check the list's key format, --topic and the partitions read"


def _looks_like(samples: list[bytes]) -> str | None:
    """hex or base64 where every sampled key is written in it, and one of them shows it (hex: a
    letter, since decimal numbers are hex digits too; base64: a padding `=`, a `+` or a `/`, since
    plain words are base64 too), else None."""
    texts = [s for s in samples if s]
    if not texts:
        return None
    if all(HEX.fullmatch(t) for t in texts) and any(re.search(rb"[a-fA-F]", t) for t in texts):
        return "hex"
    if all(BASE64.fullmatch(t) for t in texts) and any(re.search(rb"[=+/]", t) for t in texts):
        return "base64"
    return None
