"""Just enough of PNG to read a browser's screenshot: 8-bit RGB or RGBA, not interlaced."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class Image:
    width: int
    height: int
    channels: int
    pixels: bytes  # rows of width * channels bytes, filters undone

    def rgb(self, x: int, y: int) -> tuple[int, int, int]:
        at = (y * self.width + x) * self.channels
        r, g, b = self.pixels[at : at + 3]
        return r, g, b

    def runs(self, color: tuple[int, int, int]) -> list[tuple[int, int, int]]:
        """Horizontal runs of exactly `color`: (row, first x, length)."""
        found = []
        for y in range(self.height):
            x = 0
            while x < self.width:
                if self.rgb(x, y) == color:
                    start = x
                    while x < self.width and self.rgb(x, y) == color:
                        x += 1
                    found.append((y, start, x - start))
                else:
                    x += 1
        return found


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def decode(data: bytes) -> Image:
    """The pixels of a PNG file (the five filter types undone)."""
    assert data[:8] == SIGNATURE, "not a PNG file"
    at, idat, header = 8, bytearray(), b""
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    width, height, depth, color_type, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and color_type in (2, 6) and interlace == 0, header
    channels = 3 if color_type == 2 else 4
    raw, stride = zlib.decompress(bytes(idat)), width * channels
    out = bytearray(height * stride)
    prior = bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = prior[i], (prior[i - channels] if i >= channels else 0)
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                line[i] = (line[i] + _paeth(left, up, corner)) & 0xFF
        out[y * stride : (y + 1) * stride] = line
        prior = line
    return Image(width, height, channels, bytes(out))
