"""The erase's key list, its matching of framed records, and its empty-header rule."""

from __future__ import annotations

import base64
import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pipelines.errors import ConfigError
from pipelines.jobs.erase.plan import retain_empty
from pipelines.keys.key_list import KeyList, read_key_list
from pipelines.keys.key_notes import UTF8_BOM, WIDE_BOMS
from pipelines.keys.key_set import ErasedKeys, matched_entries
from segment_io.segment.reader import SegmentReader
from segment_io.storage import open_storage
from tests.helpers import v2_batch, write_segment

pytestmark = pytest.mark.unit

KEYS = [b"alice", b"bob", b"\x00\xffbin", b""]


def keys_of(found: ErasedKeys) -> list[bytes]:
    return [found.key(e) for e in range(len(found))]


def test_text_list_in_each_format(tmp_path: Path) -> None:
    utf8 = tmp_path / "k.txt"
    utf8.write_bytes(b"alice\r\nbob\n\nalice\n")  # CRLF, a blank line, a repeat
    assert keys_of(read_key_list(str(utf8))) == [b"alice", b"bob"]
    hexed = tmp_path / "k.hex"
    hexed.write_text("\n".join(k.hex() for k in KEYS[:3]))
    assert keys_of(read_key_list(str(hexed), "hex")) == KEYS[:3]
    b64 = tmp_path / "k.b64"
    b64.write_text("\n".join(base64.b64encode(k).decode() for k in KEYS[:3]))
    assert keys_of(read_key_list(str(b64), "base64")) == KEYS[:3]


def test_parquet_binary_and_string_columns_and_csv(tmp_path: Path) -> None:
    pq.write_table(pa.table({"key": pa.array(KEYS, pa.binary()), "other": range(4)}), tmp_path / "b.parquet")
    assert keys_of(read_key_list(str(tmp_path / "b.parquet"))) == KEYS  # the empty key is a key
    pq.write_table(pa.table({"key": [k.hex() for k in KEYS[:3]]}), tmp_path / "s.parquet")
    assert keys_of(read_key_list(str(tmp_path / "s.parquet"), "hex")) == KEYS[:3]
    (tmp_path / "k.csv").write_text("id,key\n1,alice\n2,bob\n")
    assert keys_of(read_key_list(str(tmp_path / "k.csv"))) == [b"alice", b"bob"]


def test_bad_lists_are_refused_with_where(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(ConfigError, match="holds no key"):
        read_key_list(str(empty))
    bad = tmp_path / "bad.txt"
    bad.write_text("00ff\nzz\n")
    with pytest.raises(ConfigError, match="at byte 5: not hex"):
        read_key_list(str(bad), "hex")
    pq.write_table(pa.table({"id": [1]}), tmp_path / "nokey.parquet")
    with pytest.raises(ConfigError, match="no 'key' column"):
        read_key_list(str(tmp_path / "nokey.parquet"))
    with pytest.raises(ConfigError, match="no such file"):
        read_key_list(str(tmp_path / "absent.txt"))
    zero = tmp_path / "zero.txt"
    zero.write_bytes(b"")  # 0 bytes: refused as empty, for every format (was an IndexError)
    for key_format in ("utf8", "hex", "base64"):
        with pytest.raises(ConfigError, match=r"zero\.txt: the list holds no key"):
            read_key_list(str(zero), key_format)
    odd = tmp_path / "odd.txt"
    odd.write_text("00ff\nabc\n")
    with pytest.raises(ConfigError, match="at byte 5: not hex: an odd number of hex digits"):
        read_key_list(str(odd), "hex")


def test_lines_padded_with_whitespace_are_warned_of_by_line_number(tmp_path: Path) -> None:
    from pipelines.keys.key_list import checked_key_list

    listed = tmp_path / "k.txt"
    listed.write_bytes(b"alice\n bob\ncarol \r\n\ndave\n\teve\nfrank\t\ng \nh \ni \n")
    said: list[str] = []
    keys = checked_key_list(str(listed), "utf8", said.append)
    assert keys_of(keys) == [b"alice", b" bob", b"carol ", b"dave", b"\teve", b"frank\t", b"g ", b"h ", b"i "]
    [line] = said
    assert "7 lines begin or end with a space or a tab (line 2, 3, 6, 7, 8, ...)" in line
    assert KeyList.open(str(listed)).notes.padded == 7
    clean = tmp_path / "clean.txt"
    clean.write_text("alice\nbob\n")
    assert KeyList.open(str(clean)).warnings() == []


def parts_read(keys: KeyList, count: int) -> list[bytes]:
    return [k for part in keys.parts(count) for array in part.read() for k in array.to_pylist()]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(st.binary(min_size=0, max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=60),
    crlf=st.booleans(),
    final_newline=st.booleans(),
    count=st.integers(1, 9),
    read_bytes=st.integers(1, 64),
)
def test_a_line_list_read_in_parts_is_the_list_read_whole(
    tmp_path: Path, lines: list[bytes], crlf: bool, final_newline: bool, count: int, read_bytes: int
) -> None:
    """Parts split the file at any byte, each read a few bytes at a time: every line is read once,
    by the part it starts in, blank lines skipped and CRLF endings taken off, as read whole."""
    lines = [line.removesuffix(b"\r") for line in lines]
    raw = (b"\r\n" if crlf else b"\n").join(lines) + (b"\n" if final_newline and lines else b"")
    # A list that starts with a byte-order mark is another case (its mark is taken off, or refused).
    assume(not raw.startswith((UTF8_BOM, *(mark for mark, _ in WIDE_BOMS))))
    path = tmp_path / "keys.txt"
    path.write_bytes(raw)
    whole = [line for line in raw.split(b"\n") if line.removesuffix(b"\r")]
    whole = [line.removesuffix(b"\r") for line in whole]
    keys = KeyList.open(str(path))
    keys = dataclasses.replace(keys, size=keys.size_on_disk)
    parts = [
        dataclasses.replace(p, lo=lo, hi=hi)
        for p, (lo, hi) in zip(keys.parts(1) * count, _cuts(len(raw), count), strict=True)
    ]
    import pipelines.keys.key_list as key_list

    saved = key_list.LINE_READ_BYTES
    key_list.LINE_READ_BYTES = read_bytes
    try:
        got = [k for part in parts for array in part.read() for k in array.to_pylist()]
    finally:
        key_list.LINE_READ_BYTES = saved
    assert got == whole


def _cuts(size: int, count: int) -> list[tuple[int, int]]:
    bounds = [size * i // count for i in range(count + 1)]
    return list(itertools.pairwise(bounds))


def test_parquet_and_csv_lists_read_in_parts_as_whole(tmp_path: Path) -> None:
    keys = [f"user-{i}".encode() for i in range(1000)]
    pq.write_table(pa.table({"key": pa.array(keys, pa.binary())}), tmp_path / "k.parquet", row_group_size=128)
    parquet = KeyList.open(str(tmp_path / "k.parquet"))
    assert parquet.row_groups == 8 and parquet.size >= sum(map(len, keys))
    assert len(parquet.parts(3)) == 3 and parts_read(parquet, 3) == keys
    (tmp_path / "k.csv").write_text("id,key\n" + "".join(f"{i},{k.decode()}\n" for i, k in enumerate(keys)))
    assert parts_read(KeyList.open(str(tmp_path / "k.csv")), 4) == keys
    hexed = tmp_path / "k.hex"
    hexed.write_text("00ff\nzz\n")
    with pytest.raises(ConfigError, match="at byte 5: not hex"):
        parts_read(KeyList.open(str(hexed), "hex"), 1)
    # A row its reader cannot read, however deep in the file, is a typed refusal naming the file.
    (tmp_path / "bad.csv").write_text(
        "id,key\n" + "".join(f"{i},user-{i}\n" for i in range(100_000)) + "1,a,b\n"
    )
    with pytest.raises(ConfigError, match=r"bad\.csv: not a readable csv key list: .*columns"):
        parts_read(KeyList.open(str(tmp_path / "bad.csv")), 1)
    # A list to join is checked as far as it can be unread: a CSV file needs its key column.
    (tmp_path / "nokey.csv").write_text("id,user\n1,alice\n")
    with pytest.raises(ConfigError, match="no 'key' column"):
        KeyList.open(str(tmp_path / "nokey.csv"))


def test_digests_are_hmac_sha256_of_the_key_bytes_under_the_secret() -> None:
    import hashlib
    import hmac

    from pipelines.keys.key_digest import KeyDigest

    secret = b"sixteen or more bytes"
    found = ErasedKeys.of(KEYS)
    assert found.digests(KeyDigest(secret)) == [hmac.new(secret, k, hashlib.sha256).hexdigest() for k in KEYS]


# (offset delta, timestamp delta, key, value, headers) of records matched against alice and bob,
# with header "user" named.
HEADER_RECORDS = [
    (0, 0, b"alice", b"v", []),
    (1, 0, b"alicE", b"v", []),  # one byte off: kept
    (2, 0, None, b"v", [("user", b"bob")]),  # a null key, a listed header value
    (3, 0, b"x", b"v", [("other", b"bob")]),  # a listed value in a header not named
    (4, 0, b"x", None, [("user", b"carol"), ("user", b"alice")]),  # the second header matches
    (5, 0, b"", b"v", []),  # the empty key is not the null key
]


def test_records_match_by_exact_key_or_a_named_header_value(tmp_path: Path) -> None:
    path = write_segment(tmp_path, 0, v2_batch(0, HEADER_RECORDS))
    storage, _ = open_storage(str(tmp_path))
    reader = SegmentReader(storage, str(path), 0)
    framed = reader.frame(np.arange(len(reader.scan().table)))
    keys = ErasedKeys.of([b"alice", b"bob"])
    assert matched_entries(framed, keys, None).tolist() == [0, -1, -1, -1, -1, -1]
    named = ErasedKeys.of([b"user"])
    assert matched_entries(framed, keys, named).tolist() == [0, -1, 1, -1, 0, -1]
    assert matched_entries(framed, ErasedKeys.of([b""]), None).tolist() == [-1, -1, -1, -1, -1, 0]


class _Table:
    """The columns retain_empty reads."""

    def __init__(self, pid: list[int], last: list[int], control: list[bool]) -> None:
        self.producer_id = np.array(pid, dtype=np.int64)
        self.last_offset = np.array(last, dtype=np.int64)
        self.is_control = np.array(control, dtype=np.bool_)

    def __len__(self) -> int:
        return len(self.producer_id)


def test_an_emptied_batch_keeps_its_header_where_producer_state_or_the_log_end_needs_it() -> None:
    first = _Table([7, -1, 8, 7], [9, 19, 29, 39], [False, False, False, False])
    second = _Table([7, 8, -1], [40, 49, 59], [True, False, False])  # 7's marker; 8 writes again
    masks = retain_empty([first, second])  # type: ignore[list-item]
    # 7's last data batch (39; its marker is not data), 8's last (49), and the log's last (59).
    assert [m.tolist() for m in masks] == [[False, False, False, True], [False, True, True]]
    assert [m.tolist() for m in retain_empty([_Table([], [], [])])] == [[]]  # type: ignore[list-item]


@pytest.mark.parametrize("joined", [False, True], ids=["whole", "parts"])
def test_a_utf8_byte_order_mark_is_taken_off_and_said(tmp_path: Path, joined: bool) -> None:
    """What Windows editors write: the mark is no part of the first key, read whole or in parts."""
    from pipelines.keys.key_list import checked_key_list

    listed = tmp_path / "k.txt"
    listed.write_bytes(b"\xef\xbb\xbfk0000000000\r\nk1\r\n")
    said: list[str] = []
    found = checked_key_list(str(listed), "utf8", said.append)
    assert keys_of(found) == [b"k0000000000", b"k1"]
    assert said == [
        f"segpipe: note: --keys {listed}: starts with a UTF-8 byte-order mark; it was taken off "
        "(it is not part of the first key)"
    ]
    keys = KeyList.open(str(listed))
    if joined:
        assert parts_read(keys, 3) == [b"k0000000000", b"k1"]
    assert keys.samples() == [b"k0000000000", b"k1"]
    hexed = tmp_path / "k.hex"
    hexed.write_bytes(b"\xef\xbb\xbf6b30\n")
    assert keys_of(read_key_list(str(hexed), "hex")) == [b"k0"]


@pytest.mark.parametrize(
    ("mark", "encoding"),
    [
        (b"\xff\xfe", "UTF-16 LE"),
        (b"\xfe\xff", "UTF-16 BE"),
        (b"\xff\xfe\x00\x00", "UTF-32 LE"),
        (b"\x00\x00\xfe\xff", "UTF-32 BE"),
    ],
)
def test_a_utf16_or_utf32_list_is_refused_naming_its_encoding(
    tmp_path: Path, mark: bytes, encoding: str
) -> None:
    listed = tmp_path / "k.txt"
    codec = {
        "UTF-16 LE": "utf-16-le",
        "UTF-16 BE": "utf-16-be",
        "UTF-32 LE": "utf-32-le",
        "UTF-32 BE": "utf-32-be",
    }
    listed.write_bytes(mark + "k0\nk1\n".encode(codec[encoding]))
    with pytest.raises(ConfigError, match=f"the file is {encoding} text .*save it as UTF-8"):
        KeyList.open(str(listed))


def test_padding_notes_say_what_each_key_format_does_with_it(tmp_path: Path) -> None:
    hexed = tmp_path / "k.hex"
    hexed.write_bytes(b"6b30 \n\t6b31\n")
    [note] = KeyList.open(str(hexed), "hex").warnings()
    assert "2 lines begin or end" in note and "the whitespace is not part of the key" in note
    assert keys_of(read_key_list(str(hexed), "hex")) == [b"k0", b"k1"]  # as the note says
    b64 = tmp_path / "k.b64"
    b64.write_bytes(b"azA= \n")
    [note] = KeyList.open(str(b64), "base64").warnings()
    assert "base64 has no whitespace: such a key is refused" in note
    with pytest.raises(ConfigError, match="at byte 0: not base64"):
        read_key_list(str(b64), "base64")


def test_csv_padded_keys_and_parquet_null_keys_are_said(tmp_path: Path) -> None:
    (tmp_path / "k.csv").write_text("id,key\n1,alice \n2,bob\n3, carol\n")
    csv = KeyList.open(str(tmp_path / "k.csv"))
    [note] = csv.warnings()
    assert "2 rows begin or end with a space or a tab (row 1, 3)" in note and "part of the key" in note
    assert keys_of(csv.read()) == [b"alice ", b"bob", b" carol"]  # kept, as said
    pq.write_table(pa.table({"key": pa.array([b"a", None, b"b", None], pa.binary())}), tmp_path / "n.parquet")
    parquet = KeyList.open(str(tmp_path / "n.parquet"))
    [note] = parquet.warnings()
    assert "2 null keys left out" in note
    assert keys_of(parquet.read()) == [b"a", b"b"]
    pq.write_table(pa.table({"key": ["x", None, " y"]}), tmp_path / "s.parquet")
    assert [n.split(": ", 3)[-1][:40] for n in KeyList.open(str(tmp_path / "s.parquet")).warnings()] == [
        "1 row begins or ends with a space or a t",
        "1 null key left out (a record's null key",
    ]


def test_a_run_that_found_no_key_names_the_format_the_keys_look_like() -> None:
    from pipelines.keys.key_notes import nowhere_warning

    b64 = [base64.b64encode(f"k{i:010d}".encode()) for i in range(25)]
    assert nowhere_warning(25, "utf8", b64).endswith(
        f"all of them look like base64 (e.g. {b64[0].decode()!r}): did you mean --key-format base64?"
    )
    hexed = [f"k{i}".encode().hex().encode() for i in range(3)]
    assert "did you mean --key-format hex?" in nowhere_warning(3, "utf8", hexed)
    # Decimal numbers and plain words are hex digits and base64 too: no guess is made of them.
    for plain in ([b"1234", b"5678"], [b"user", b"abcd"]):
        warning = nowhere_warning(2, "utf8", plain)
        assert "did you mean" not in warning and "check the list's key format" in warning
    assert "(read as --key-format hex)" in nowhere_warning(3, "hex", hexed)
    assert "did you mean" not in nowhere_warning(3, "hex", hexed)
