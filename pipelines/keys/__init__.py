"""A list of keys to erase, as every job that honours one needs it: the list file read (whole or in
parts), the keys matched against framed records, and their SHA-256 digests (the evidence's)."""
