"""Fixtures for the tests against Kafka's own broker (marked `kafka`). Where Java or Maven is
missing they skip with the reason; SEGPIPE_REQUIRE_KAFKA=1 (set by CI) makes that a failure."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.kafka.broker import BrokerUnavailable, jars


@pytest.fixture(scope="session")
def kafka_jars() -> Path:
    try:
        return jars()
    except BrokerUnavailable as exc:
        if os.environ.get("SEGPIPE_REQUIRE_KAFKA") == "1":
            pytest.fail(f"SEGPIPE_REQUIRE_KAFKA=1 but {exc}")
        pytest.skip(str(exc))
