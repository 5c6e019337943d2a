"""What a restore with `--local` would bring back of a remote tier that an erase rewrote in place:
the erase took the listed keys' records out of the tier only, so the local log directory's
segments above it (never uploaded, or uploaded after the erase) may still hold them. Such a
restore is refused unless the operator's key list shows, from the records themselves, that none
of those segments carries a listed key."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipelines.errors import ConfigError
from pipelines.keys.key_set import ErasedKeys, matched_entries
from pipelines.log.keytable import EMPTY
from segment_io.layout import SegmentFiles, list_log_dir
from segment_io.remote.manifest import ORIGIN_ERASE
from segment_io.remote.view import TieredView
from segment_io.segment.reader import SegmentReader
from segment_io.storage import Location
from segment_io.topic_partition import TopicPartition


@dataclass(frozen=True)
class LocalAbove:
    """A local segment the restored log would take from the local log directory, in a partition
    the tier's erase rewrote."""

    tp: TopicPartition
    files: SegmentFiles


def local_segments_of_erased(view: Location) -> list[LocalAbove]:
    """The local segments of the two tiers read as one (`view`) that lie in partitions with a
    segment an in-place erase wrote."""
    storage = view.storage
    assert isinstance(storage, TieredView)
    erased = {tp for tp, m in storage.manifests.items() if any(s.origin == ORIGIN_ERASE for s in m.segments)}
    if not erased or storage.remote is None:
        return []
    remote = storage.remote.url.rstrip("/") + "/"
    return [
        LocalAbove(part.tp, files)
        for part in list_log_dir(storage, view.path).partitions
        if part.tp in erased
        for files in part.segments
        if not files.log.path.startswith(remote) and files.size > 0
    ]


def require_no_unerased(view: Location, local: Location, keys: ErasedKeys | None) -> None:
    """Refuse a restore that would bring back erased keys' records from `local` (see the module)."""
    above = local_segments_of_erased(view)
    if not above:
        return
    where = ", ".join(sorted({f"{a.tp} from offset {a.files.base_offset}" for a in above}))
    if keys is None:
        raise ConfigError(
            f"restore refused: the remote tier was erased in place, and {local} holds segments above it "
            f"that the erase did not touch ({where}); they may hold the erased keys' records. Restore "
            "without --local, or give the erase's key list (--keys FILE): the restore then goes ahead "
            "only if no record of those segments carries a listed key"
        )
    found = []
    for a in above:
        reader = SegmentReader(view.storage, a.files.log.path, a.files.base_offset)
        table = reader.scan().table
        framed = reader.frame(np.flatnonzero(~table.is_control))
        hit = matched_entries(framed, keys, None) != EMPTY
        if hit.any():
            offsets = framed.offset[hit]
            found.append(f"{a.tp}: {int(hit.sum())} records, offsets {int(offsets[0])}..{int(offsets[-1])}")
    if found:
        raise ConfigError(
            f"restore refused: {local} holds records of listed keys above the erased remote tier "
            f"({'; '.join(found)}); erase them from it first (segpipe erase {local} ERASED --keys FILE) "
            "and restore with --local ERASED"
        )
