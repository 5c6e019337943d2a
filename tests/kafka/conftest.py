"""Fixtures for the tests against Kafka's own broker (marked `kafka`). Where Java or Maven is
missing they skip with the reason; SEGPIPE_REQUIRE_KAFKA=1 (set by CI) makes that a failure."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.kafka.broker import POM, TIERED_POM, BrokerUnavailable, jars


def fetched(pom: Path) -> Path:
    try:
        return jars(pom)
    except BrokerUnavailable as exc:
        if os.environ.get("SEGPIPE_REQUIRE_KAFKA") == "1":
            pytest.fail(f"SEGPIPE_REQUIRE_KAFKA=1 but {exc}")
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def kafka_jars() -> Path:
    """Kafka's current release (tests/kafka/pom.xml)."""
    return fetched(POM)


@pytest.fixture(scope="session")
def kafka_tiered_jars() -> Path:
    """The release whose test jars hold Kafka's LocalTieredStorage (tests/kafka/pom-tiered.xml)."""
    return fetched(TIERED_POM)
