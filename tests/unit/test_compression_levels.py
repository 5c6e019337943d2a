"""compression.lz4.level as Kafka reads it: 1..17, default 9, where 9 is LZ4's fast compressor (as
Kafka's lz4 writer does) and any other level LZ4 HC."""

from __future__ import annotations

import random

import lz4.frame
import pytest

from pipelines.config import JobConfig
from segment_io.format.compression import DEFAULT_LEVELS, CompressionLevels, compress, decompress
from segment_io.format.constants import Codec

pytestmark = pytest.mark.unit
WORDS = b"order created shipped paid refund account warehouse sku pending".split()
DATA = b" ".join(random.Random(7).choice(WORDS) + str(i % 97).encode() for i in range(4000))


def test_the_default_level_is_kafkas_and_compresses_with_the_fast_compressor() -> None:
    assert DEFAULT_LEVELS.lz4 == 9
    fast = lz4.frame.compress(
        DATA,
        block_linked=False,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        store_size=False,
        compression_level=0,
    )
    assert compress(Codec.LZ4, DATA) == fast
    hc = compress(Codec.LZ4, DATA, CompressionLevels(lz4=12))
    assert hc != fast and decompress(Codec.LZ4, hc) == DATA


@pytest.mark.parametrize("level", ["0", "18", "x"])
def test_levels_kafka_refuses_are_refused(level: str) -> None:
    with pytest.raises(Exception, match="from 1 to 17"):
        JobConfig.build({"compression.lz4.level": level}).for_topic("t")
    assert JobConfig.build({"compression.lz4.level": "17"}).for_topic("t").lz4_level == 17
