"""How keys are written in a key list (erase's `--keys`, a job file's `erase.keys`): utf8 (a
line's bytes as they are), hex, or base64."""

KEY_FORMATS = ("utf8", "hex", "base64")
