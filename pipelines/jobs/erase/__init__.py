"""erase: the records of listed keys removed, with evidence (docs/erasing-keys.md)."""
