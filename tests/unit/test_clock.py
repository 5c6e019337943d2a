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


@pytest.mark.parametrize("text", ["-1", "-2", "-5"])
def test_kafka_s_listoffsets_sentinels_are_not_times(text: str) -> None:
    with pytest.raises(ConfigError, match=r"-1 means the latest offset and -2 the earliest"):
        parse_time(text, "--until-time")


@pytest.mark.parametrize("text", ["1700300000", "1000000000", "99999999999"])
def test_a_value_that_can_only_be_epoch_seconds_is_refused_with_the_reason(text: str) -> None:
    with pytest.raises(ConfigError, match=rf"looks like epoch seconds .*give {int(text) * 1000} "):
        parse_time(text, "--until-time")
    # Epoch milliseconds around it, and small values (tests, the epoch itself), are taken.
    assert parse_time(str(int(text) * 1000)) == int(text) * 1000
    assert parse_time("0") == 0 and parse_time("999999999") == 999_999_999
