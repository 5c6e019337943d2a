"""Checkpoint text files: the root offset checkpoints and `leader-epoch-checkpoint`
(docs/log-format.md#checkpoint-files). Malformed files raise CorruptCheckpoint."""

from __future__ import annotations

from segment_io.errors import CorruptCheckpoint
from segment_io.topic_partition import TopicPartition


def _lines(data: bytes, path: str, what: str) -> list[tuple[int, str]]:
    """(byte position, text) of each line after a version `0` line and an entry count line that
    matches the number of entries (none when the file ends before the count, as Kafka reads it);
    anything else raises CorruptCheckpoint."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptCheckpoint(path, exc.start, f"{what} is not UTF-8 text") from None
    lines: list[tuple[int, str]] = []
    position = 0
    for line in text.split("\n"):
        lines.append((position, line))
        position += len(line.encode()) + 1
    if lines and lines[-1][1] == "":
        lines.pop()
    # Kafka reads a file that ends before its entry count line as empty: it creates the
    # cleaner's checkpoint empty (0 bytes) and leaves it so until the cleaner has an entry.
    if not lines:
        return []
    if lines[0][1].strip() != "0":
        raise CorruptCheckpoint(path, 0, f"unknown {what} version {lines[0][1]!r}")
    if len(lines) == 1:
        return []
    count_at, count_text = lines[1]
    if not count_text.strip().isdigit():
        raise CorruptCheckpoint(path, count_at, f"bad entry count {count_text!r}")
    entries = lines[2:]
    if int(count_text) != len(entries):
        raise CorruptCheckpoint(path, count_at, f"entry count {int(count_text)} but {len(entries)} entries")
    return entries


def _integer(text: str) -> bool:
    return text.lstrip("-").isdigit()


def parse_offset_checkpoint(data: bytes, path: str) -> dict[TopicPartition, int]:
    """An offset checkpoint: version 0, entry count, `topic partition offset` lines."""
    out: dict[TopicPartition, int] = {}
    for position, line in _lines(data, path, "checkpoint"):
        fields = line.split()
        if len(fields) != 3 or not _integer(fields[1]) or not _integer(fields[2]):
            raise CorruptCheckpoint(path, position, f"bad entry {line!r}")
        out[TopicPartition(fields[0], int(fields[1]))] = int(fields[2])
    return out


def without_topic(data: bytes, path: str, topic: str) -> bytes | None:
    """An offset checkpoint with `topic`'s entries left out, or None where it has none."""
    entries = parse_offset_checkpoint(data, path)
    kept = {tp: offset for tp, offset in entries.items() if tp.topic != topic}
    return None if len(kept) == len(entries) else format_offset_checkpoint(kept)


def format_offset_checkpoint(entries: dict[TopicPartition, int]) -> bytes:
    lines = ["0", str(len(entries))]
    lines += [f"{tp.topic} {tp.partition} {off}" for tp, off in sorted(entries.items())]
    return ("\n".join(lines) + "\n").encode()


def parse_leader_epoch_checkpoint(data: bytes, path: str) -> list[tuple[int, int]]:
    """`leader-epoch-checkpoint`: version 0, entry count, `epoch startOffset` lines, as
    (epoch, start offset) pairs."""
    out = []
    for position, line in _lines(data, path, "leader epoch checkpoint"):
        fields = line.split()
        if len(fields) != 2 or not _integer(fields[0]) or not _integer(fields[1]):
            raise CorruptCheckpoint(path, position, f"bad entry {line!r}")
        out.append((int(fields[0]), int(fields[1])))
    return out


def format_leader_epoch_checkpoint(entries: list[tuple[int, int]]) -> bytes:
    lines = ["0", str(len(entries))] + [f"{e} {o}" for e, o in entries]
    return ("\n".join(lines) + "\n").encode()
