"""Segments written in Aiven's layout, checked against what Aiven's plugin wrote: a tier without
compression or encryption is written again object for object, byte for byte; a compressed and
encrypted one reads back through the layout's reader with the key pair's private key, and its
manifests have the plugin's fields in the plugin's order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from segment_io.kafka_tier.aiven import AivenSegment
from segment_io.kafka_tier.aiven_write import AivenWriting, write_aiven_segment
from segment_io.kafka_tier.keyring import Keyring, PublicKey
from segment_io.kafka_tier.view import KafkaTierView, kafka_tier_url
from segment_io.storage import LocalStorage, open_storage
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
        LocalStorage(), str(root), s.seg, s.read_log(), {k: s.index(k) for k in KINDS}, how
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
