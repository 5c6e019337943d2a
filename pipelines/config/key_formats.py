"""How keys are written in a key list (erase's `--keys`, a job file's `erase.keys`): utf8 (a
line's bytes as they are), hex, or base64."""

from __future__ import annotations

import base64

KEY_FORMATS = ("utf8", "hex", "base64")


def decode_key(text: bytes, key_format: str) -> bytes:
    """A key's bytes from its text in `key_format` (hex: its spaces and tabs ignored; base64: only
    its alphabet and padding); ValueError (binascii.Error is one) for a text not in that format."""
    if key_format == "hex":
        digits = "".join(text.decode("ascii").split())
        if len(digits) % 2:
            raise ValueError(f"an odd number of hex digits ({len(digits)}): a byte is two")
        return bytes.fromhex(digits)
    if key_format == "base64":
        return base64.b64decode(text, validate=True)
    return text
