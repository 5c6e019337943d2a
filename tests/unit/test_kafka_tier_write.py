"""Segments written in Aiven's layout, checked against what Aiven's plugin wrote: a tier without
compression or encryption is written again object for object, byte for byte; a compressed and
encrypted one reads back through the layout's reader with the key pair's private key, and its
manifests have the plugin's fields in the plugin's order."""

from __future__ import annotations

import json
import mmap
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from segment_io.errors import KafkaTierCorrupt
from segment_io.index import build_indexes
from segment_io.kafka_tier.aiven import AivenSegment
from segment_io.kafka_tier.aiven_write import AivenWriting, write_aiven_segment
from segment_io.kafka_tier.keyring import Keyring, PublicKey
from segment_io.kafka_tier.objects import SuccessorFiles
from segment_io.kafka_tier.url import kafka_tier_url
from segment_io.kafka_tier.view import KafkaTierView
from segment_io.segment.scan import scan_buffer
from segment_io.storage import LocalStorage, open_storage
from segment_io.storage.base import Checksum
from tests.kip405 import ENCRYPTED, KIP405, PLAIN, tier

pytestmark = pytest.mark.unit
KINDS = ("index", "timeindex", "snapshot", "leader-epoch", "txnindex")


def segments(name: str, tmp_path: Path) -> list[AivenSegment]:
    t = tier(name, tmp_path)
    view, _ = open_storage(kafka_tier_url(str(t.settings), str(t.logdir)))
    assert isinstance(view, KafkaTierView)
    return [s for segs in view.remote.values() for s in segs]  # type: ignore[misc]


def rewrite(s: AivenSegment, root: Path, how: AivenWriting) -> Any:
    return write_aiven_segment(
        LocalStorage(), str(root), s.seg, s.log_chunks(), {k: s.index(k) for k in KINDS}, how
    )


def test_a_plain_tier_is_written_again_byte_for_byte(tmp_path: Path) -> None:
    out = tmp_path / "bucket"
    for s in segments(PLAIN, tmp_path):
        written = rewrite(s, out, AivenWriting(16384, False, None))
        for suffix, path in s.paths.items():
            again = out / Path(path).relative_to(KIP405 / PLAIN / "bucket")
            assert again.read_bytes() == Path(path).read_bytes(), (s.seg.segment_id, suffix)
        # The custom metadata the broker recorded for the segment is what the writer returns.
        assert written.custom_metadata == s.seg.custom_metadata


def test_a_log_streams_in_as_pieces_and_back_out_chunk_by_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer takes the log as it streams from a file (pieces of whatever size) and cuts it
    into the configured chunks itself: the objects are those of the log given whole. Read back
    whole, the log comes a few chunks per ranged read, yielded one by one: the manifest's chunks,
    together the log."""
    import random

    from segment_io.kafka_tier import aiven

    s = segments(ENCRYPTED, tmp_path)[0]
    log = s.read_log()
    keys = KIP405 / ENCRYPTED / "keys"
    how = AivenWriting(1024, True, PublicKey.load("k1", str(keys / "public.pem")))
    written = {}
    for name, pieces in (("whole", [log]), ("pieces", [log[i : i + 1000] for i in range(0, len(log), 1000)])):
        draw = random.Random(7)
        out = tmp_path / name
        custom = write_aiven_segment(
            LocalStorage(),
            str(out),
            s.seg,
            pieces,
            {},
            how,
            lambda n, d=draw: d.randbytes(n),  # type: ignore[misc]
        ).custom_metadata
        written[name] = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert written["whole"] == written["pieces"] and len(written["whole"]) == 3

    reads: list[tuple[int, int | None]] = []
    storage = LocalStorage()
    plain_read = storage.read
    monkeypatch.setattr(storage, "read", lambda p, a=0, b=None: reads.append((a, b)) or plain_read(p, a, b))
    monkeypatch.setattr(aiven, "FETCH_BYTES", 3000)
    seg = replace(s.seg, custom_metadata=custom)
    back = AivenSegment(
        storage, str(tmp_path / "pieces"), seg, "", Keyring({"k1": str(keys / "private.pem")})
    )
    back.check()
    reads.clear()
    chunks = list(back.log_chunks())
    assert [len(c) for c in chunks] == [c.original_size for c in back.manifest.chunks_for(0, len(log))]
    assert b"".join(chunks) == log and len(chunks) > 4
    assert 1 < len(reads) < len(chunks)  # several chunks per ranged read, several reads
    assert all(b is not None and b - a < 3000 + 1024 + 28 for a, b in reads)


def keys_in_order(doc: Any) -> Any:
    if isinstance(doc, dict):
        return [(k, keys_in_order(v)) for k, v in doc.items()]
    return None


def test_a_compressed_encrypted_tier_reads_back_with_the_plugins_manifest(tmp_path: Path) -> None:
    keys = KIP405 / ENCRYPTED / "keys"
    how = AivenWriting(16384, True, PublicKey.load("k1", str(keys / "public.pem")))
    out = tmp_path / "bucket"
    keyring = Keyring({"k1": str(keys / "private.pem")})
    for s in segments(ENCRYPTED, tmp_path):
        written = rewrite(s, out, how)
        back = AivenSegment(LocalStorage(), str(out), s.seg, "", keyring)
        assert back.read_log() == s.read_log()
        assert all(back.index(k) == s.index(k) for k in KINDS)
        theirs = json.loads(Path(s.paths["rsm-manifest"]).read_bytes())
        assert keys_in_order(written.manifest) == keys_in_order(theirs)
        assert written.manifest["encryption"]["dataKey"] != theirs["encryption"]["dataKey"]  # a new data key
        assert back.read_log(20_000, 20_100) == s.read_log(20_000, 20_100)


def test_a_successor_is_uploaded_read_back_and_deleted_in_the_plugins_layout(tmp_path: Path) -> None:
    from pipelines.kafka_tier.swap import new_segment_id, successor

    view, store, old = aiven_store(ENCRYPTED, tmp_path)
    files = {"log": old.read_log(), **{k: v for k in KINDS if (v := old.index(k)) is not None}}
    new = successor(old.seg, new_segment_id(), len(files["log"]), old.seg.max_timestamp_ms, 1_700_000_000_000)
    custom = store.upload(new, SuccessorFiles.held(files))
    served = AivenSegment(store.storage, store.root, replace(new, custom_metadata=custom), "", view.keyring)
    assert store.read_back(served.seg) == Checksum.of(old.read_log())
    assert all(served.index(k) == old.index(k) for k in KINDS)
    ours = json.loads(Path(served.paths["rsm-manifest"]).read_bytes())
    theirs = json.loads(Path(old.paths["rsm-manifest"]).read_bytes())
    assert keys_in_order(ours) == keys_in_order(theirs)  # every field the plugin writes, in its order
    meta, their_meta = ours["remoteLogSegmentMetadata"], theirs["remoteLogSegmentMetadata"]
    assert meta["remoteLogSegmentId"]["id"] == new.segment_id != their_meta["remoteLogSegmentId"]["id"]
    assert {k: v for k, v in meta.items() if k not in ("remoteLogSegmentId", "eventTimestampMs")} == {
        k: v for k, v in their_meta.items() if k not in ("remoteLogSegmentId", "eventTimestampMs")
    }
    assert ours["encryption"]["dataKey"].startswith("k1:") and ours["encryption"] != theirs["encryption"]
    store.delete(served.seg)
    assert not any(Path(p).exists() for p in served.paths.values())
    assert all(Path(p).exists() for p in old.paths.values())


def compacted(log: bytes, base_offset: int, keep: slice) -> tuple[bytes, dict[str, bytes]]:
    """A compaction's successor of a segment: the batches `keep` picks (none, or some, as a pass
    that removes whole batches leaves them), at their offsets, with indexes built for them."""
    table = scan_buffer("<log>", base_offset, np.frombuffer(log, np.uint8)).table
    picked = list(range(len(table)))[keep]
    out = b"".join(log[table.position[i] : table.position[i] + table.size[i]] for i in picked)
    sizes = table.size[picked]
    positions = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if picked else sizes
    index, timeindex = build_indexes(
        base_offset, positions, sizes, table.last_offset[picked], table.max_timestamp[picked]
    )
    return out, {"log": out, "index": index, "timeindex": timeindex}


def aiven_store(name: str, tmp_path: Path) -> tuple[KafkaTierView, Any, AivenSegment]:
    from pipelines.kafka_tier.stores import AivenStore, segment_store

    t = tier(name, tmp_path, copy_bucket=True)
    view, _ = open_storage(kafka_tier_url(str(t.settings), str(t.logdir)))
    assert isinstance(view, KafkaTierView)
    store = segment_store(view.settings, *view.objects, view.keyring)
    assert isinstance(store, AivenStore)
    old = next(s for segs in view.remote.values() for s in segs)
    assert isinstance(old, AivenSegment)
    return view, store, old


@pytest.mark.parametrize("name", [PLAIN, ENCRYPTED])
def test_a_compacted_successor_reads_back_in_the_plugins_layout(tmp_path: Path, name: str) -> None:
    from pipelines.kafka_tier.swap import new_segment_id, successor, unservable

    view, store, old = aiven_store(name, tmp_path)
    log, files = compacted(old.read_log(), old.seg.start_offset, slice(0, None, 2))
    assert 0 < len(log) < old.seg.size
    new = successor(old.seg, new_segment_id(), len(log), old.seg.max_timestamp_ms, 1_700_000_000_000)
    assert unservable(store, new) is None
    served = AivenSegment(
        store.storage,
        store.root,
        replace(new, custom_metadata=store.upload(new, SuccessorFiles.held(files))),
        "",
        view.keyring,
    )
    assert store.read_back(served.seg) == Checksum.of(log)
    served.check()
    assert served.index("index") == files["index"] and served.index("timeindex") == files["timeindex"]
    assert (
        served.read_log(100, len(log) - 100) == log[100 : len(log) - 100]
    )  # across chunks, as a fetch reads
    # The successor's batches are the kept ones, offset for offset.
    back = scan_buffer("<back>", new.start_offset, np.frombuffer(served.read_log(), np.uint8)).table
    kept = scan_buffer("<kept>", new.start_offset, np.frombuffer(log, np.uint8)).table
    assert back.last_offset.tolist() == kept.last_offset.tolist() and len(back) > 1


@pytest.mark.parametrize("name", [PLAIN, ENCRYPTED])
def test_a_successor_of_no_batch_is_never_made_in_the_plugins_layout(tmp_path: Path, name: str) -> None:
    """The plugin's fetch looks up the chunk that holds its start position: a log of no bytes has
    none, so every fetch of it would fail. Such a successor is refused before it is planned, and
    before any object of it is written."""
    from pipelines.kafka_tier.swap import EMPTY_UNSERVED, new_segment_id, successor, unservable
    from segment_io.errors import UploadFailed
    from segment_io.kafka_tier.local_tiered import LocalTieredStore

    _, store, old = aiven_store(name, tmp_path)
    log, files = compacted(old.read_log(), old.seg.start_offset, slice(0, 0))
    assert log == b""
    new = successor(old.seg, new_segment_id(), 0, -1, 1_700_000_000_000)
    assert unservable(store, new) == EMPTY_UNSERVED
    assert unservable(LocalTieredStore(store.storage, str(tmp_path)), new) is None  # an empty file reads
    with pytest.raises(UploadFailed, match="no batch"):
        store.upload(new, SuccessorFiles.held(files))
    assert not any(new.segment_id in p.name for p in tmp_path.rglob("*"))


def test_a_local_tiered_log_is_read_mapped_and_refused_when_short(tmp_path: Path) -> None:
    """LocalTieredStorage keeps a log plain on a local disk: read whole it is mapped from its file
    (a scan touches the pages of batch headers only; a 1 GiB segment is never held), exactly the
    bytes a read returns; a file shorter than its metadata says is refused at its end."""
    from segment_io.kafka_tier.local_tiered import LocalTieredSegment, LocalTieredStore

    _, _, old = aiven_store(PLAIN, tmp_path)
    log = old.read_log()
    assert np.array_equal(old.read_log_array(), np.frombuffer(log, np.uint8))  # chunks decrypted whole
    root = str(tmp_path / "local-tier")
    LocalTieredStore(LocalStorage(), root).upload(old.seg, SuccessorFiles.held({"log": log}))
    local = LocalTieredSegment(LocalStorage(), root, old.seg)
    mapped = local.read_log_array()
    chain: Any = mapped
    while chain is not None and not isinstance(chain, mmap.mmap):  # what the array's memory is
        chain = getattr(chain, "base", None)
    assert isinstance(chain, mmap.mmap)
    assert mapped.tobytes() == log == local.read_log()
    path = Path(local.paths["log"])
    path.write_bytes(log[:-7])
    with pytest.raises(KafkaTierCorrupt, match=f"{len(log) - 7}: .*ends there"):
        local.read_log_array()
