"""The primitives of Kafka's message schemas (the protocol's and the metadata records'), read from
bytes and written to them: what the internal topics' keys and values and the remote log metadata
records are made of."""

from __future__ import annotations

import base64
import struct
from typing import Any


class ProtocolReader:
    """Kafka protocol primitives over a byte string, in their non-flexible and flexible (compact)
    forms: big-endian integers, unsigned varints, strings, bytes, arrays, UUIDs and tagged fields."""

    def __init__(self, data: bytes, flexible: bool = False) -> None:
        self.data = data
        self.pos = 0
        self.flexible = flexible

    def _unpack(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def int8(self) -> int:
        return int(self._unpack(">b"))

    def int16(self) -> int:
        return int(self._unpack(">h"))

    def int32(self) -> int:
        return int(self._unpack(">i"))

    def int64(self) -> int:
        return int(self._unpack(">q"))

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7

    def _length(self, wide: bool) -> int:
        if self.flexible:
            return self.uvarint() - 1
        return self.int32() if wide else self.int16()

    def string(self) -> str | None:
        n = self._length(wide=False)
        if n < 0:
            return None
        return self.take(n).decode("utf-8")

    def bytes_(self) -> bytes | None:
        n = self._length(wide=True)
        if n < 0:
            return None
        return self.take(n)

    def array_len(self) -> int:
        return self._length(wide=True)

    def varlong(self) -> int:
        """A signed (zigzag) varint, as Kafka's VARLONG."""
        raw = self.uvarint()
        return (raw >> 1) ^ -(raw & 1)

    def uuid(self) -> str:
        """A UUID as Kafka prints one: URL-safe base64 of its 16 bytes, unpadded."""
        raw = self.take(16)
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def take(self, n: int) -> bytes:
        """The next `n` bytes; IndexError where fewer remain."""
        if n < 0 or self.pos + n > len(self.data):
            raise IndexError(f"{n} bytes wanted at byte {self.pos}, {len(self.data) - self.pos} remain")
        value = self.data[self.pos : self.pos + n]
        self.pos += n
        return value

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos

    def tagged_fields(self) -> dict[int, bytes]:
        if not self.flexible:
            return {}
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self.take(self.uvarint())
        return out


class ProtocolWriter:
    """Kafka protocol primitives written in their flexible (compact) forms, the inverse of
    `ProtocolReader(flexible=True)`."""

    def __init__(self) -> None:
        self.out = bytearray()

    def int8(self, value: int) -> ProtocolWriter:
        self.out += struct.pack(">b", value)
        return self

    def int32(self, value: int) -> ProtocolWriter:
        self.out += struct.pack(">i", value)
        return self

    def int64(self, value: int) -> ProtocolWriter:
        self.out += struct.pack(">q", value)
        return self

    def uvarint(self, value: int) -> ProtocolWriter:
        while value >= 0x80:
            self.out.append((value & 0x7F) | 0x80)
            value >>= 7
        self.out.append(value)
        return self

    def varlong(self, value: int) -> ProtocolWriter:
        """A signed (zigzag) varint, as Kafka's VARLONG."""
        return self.uvarint((value << 1) ^ (value >> 63))

    def string(self, value: str | None) -> ProtocolWriter:
        return self.bytes_(None if value is None else value.encode("utf-8"))

    def bytes_(self, value: bytes | None) -> ProtocolWriter:
        if value is None:
            return self.uvarint(0)
        self.uvarint(len(value) + 1)
        self.out += value
        return self

    def array_len(self, n: int) -> ProtocolWriter:
        return self.uvarint(n + 1)

    def uuid(self, value: str) -> ProtocolWriter:
        """A UUID given as Kafka prints one (URL-safe base64 of its 16 bytes, unpadded)."""
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        if len(raw) != 16:
            raise ValueError(f"{value!r} is no UUID")
        self.out += raw
        return self

    def tagged_fields(self, fields: dict[int, bytes] | None = None) -> ProtocolWriter:
        fields = fields or {}
        self.uvarint(len(fields))
        for tag in sorted(fields):
            self.uvarint(tag).bytes_raw(fields[tag])
        return self

    def bytes_raw(self, value: bytes) -> ProtocolWriter:
        """`value` preceded by its length as an unsigned varint (a tagged field's form)."""
        self.uvarint(len(value))
        self.out += value
        return self

    def done(self) -> bytes:
        return bytes(self.out)
