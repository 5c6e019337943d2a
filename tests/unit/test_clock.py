"""`--now`: epoch milliseconds or ISO-8601, UTC unless an offset is named."""

from __future__ import annotations

import pytest

from pipelines.clock import iso, parse_time
from pipelines.errors import ConfigError

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1700697600000", 1_700_697_600_000),
        ("2023-11-23T00:00:00Z", 1_700_697_600_000),
        ("2023-11-23", 1_700_697_600_000),
        ("2023-11-23T01:00:00+01:00", 1_700_697_600_000),
        ("2023-11-23 00:00:00.250", 1_700_697_600_250),
    ],
)
def test_now_is_parsed_to_epoch_ms(text: str, ms: int) -> None:
    assert parse_time(text) == ms


def test_a_bad_now_is_refused_and_times_print_as_iso_utc() -> None:
    with pytest.raises(ConfigError, match="ISO-8601"):
        parse_time("last tuesday")
    assert iso(1_700_697_600_250) == "2023-11-23T00:00:00.250Z"
