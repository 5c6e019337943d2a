"""A run opens its source once: a broker's log directory read with its Kafka tier is one view in the
driver, and its remote log metadata is replayed once, however many checks, stages and gates read
it (the command line's refusals, the topic selection, placement, the scan)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipelines.cli.main import main
from segment_io.exit_codes import ExitCode
from segment_io.kafka_tier import metadata_cache
from segment_io.kafka_tier.view import KafkaTierView
from tests.kip405 import PLAIN, tier

pytestmark = pytest.mark.e2e
NOW_MS = "1795722460000"


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """How often this process opens a Kafka tier's view and replays its metadata."""
    counts = {"views": 0, "replays": 0}
    view_init = KafkaTierView.__init__
    replay_of = metadata_cache.MetadataReplay.of.__func__  # type: ignore[attr-defined]

    def counted_init(self: KafkaTierView, *args: Any, **kwargs: Any) -> None:
        counts["views"] += 1
        view_init(self, *args, **kwargs)

    def counted_replay(cls: type, *args: Any, **kwargs: Any) -> Any:
        counts["replays"] += 1
        return replay_of(cls, *args, **kwargs)

    monkeypatch.setattr(KafkaTierView, "__init__", counted_init)
    monkeypatch.setattr(metadata_cache.MetadataReplay, "of", classmethod(counted_replay))
    handler = signal.getsignal(signal.SIGTERM)
    try:
        yield counts
    finally:
        signal.signal(signal.SIGTERM, handler)


@pytest.mark.parametrize("command", ["erase", "cut", "clean"])
def test_a_run_over_a_kafka_tier_opens_it_once(command: str, tmp_path: Path, opened: dict[str, int]) -> None:
    t = tier(PLAIN, tmp_path)
    keys = tmp_path / "keys.txt"
    keys.write_text("k-000000004\n")
    asked = {
        "erase": ["--keys", str(keys)],
        "cut": ["--until-offset", "100"],
        "clean": ["--now-ms", NOW_MS, "--topic-set", "kip405:cleanup.policy=compact"],
    }[command]
    argv = [command, str(t.logdir), str(tmp_path / "out"), "--kafka-tier", str(t.settings), "--dry-run"]
    assert main([*argv, *asked, "--topic", "kip405"]) == ExitCode.OK
    assert opened == {"views": 1, "replays": 1}
