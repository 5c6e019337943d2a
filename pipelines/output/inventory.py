"""The inventory a published output's manifest keeps of itself: per partition, every segment file
with its size, and the records it holds. `validate` checks an output against it, so a segment
removed or cut short after publication is found without the source (docs/validation.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from segment_io.layout import LogDirListing, PartitionListing

INVENTORY = "outputs"  # the manifest's key


def segment_sizes(part: PartitionListing) -> dict[str, int]:
    """File name -> size of every segment file of a partition (logs and their indexes)."""
    return {
        f.name: f.size
        for seg in part.segments
        for f in (seg.log, seg.index, seg.timeindex, seg.txnindex)
        if f is not None
    }


def inventory(listing: LogDirListing, records: Mapping[str, int]) -> dict[str, dict[str, Any]]:
    """Partition name -> its segment files and its record count (`records`, by partition name)."""
    return {
        str(p.tp): {"records": int(records.get(str(p.tp), 0)), "segments": segment_sizes(p)}
        for p in listing.partitions
    }


def inventory_problems(
    recorded: Mapping[str, Any], listing: LogDirListing, counted: Mapping[str, int]
) -> dict[str, str]:
    """Partition name -> how the output differs from what its manifest recorded (missing partition,
    segment file missing, added or of another size, another record count); sound ones are absent."""
    present = {str(p.tp): p for p in listing.partitions}
    problems: dict[str, str] = {}
    for name, entry in recorded.items():
        part = present.get(name)
        if part is None:
            problems[name] = "the manifest lists it; the output holds no such partition"
            continue
        sizes, listed = segment_sizes(part), dict(entry.get("segments", {}))
        missing = sorted(set(listed) - set(sizes))
        extra = sorted(set(sizes) - set(listed))
        resized = sorted(n for n in set(listed) & set(sizes) if listed[n] != sizes[n])
        if missing or extra or resized:
            said = [
                f"{label} {', '.join(names[:3])}{' ...' if len(names) > 3 else ''}"
                for label, names in (("missing", missing), ("not listed", extra), ("resized", resized))
                if names
            ]
            problems[name] = "segment files differ from the manifest: " + "; ".join(said)
        elif int(entry.get("records", -1)) != counted.get(name, 0):
            problems[name] = (
                f"holds {counted.get(name, 0):,} records; the manifest says {entry.get('records')}"
            )
    for name in sorted(set(present) - set(recorded)):
        problems[name] = "the output holds it; the manifest does not list it"
    return problems
