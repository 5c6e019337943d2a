"""`--conf`: Spark settings, refused when they cannot take effect."""

from __future__ import annotations

import pytest

from pipelines.errors import ConfigError
from pipelines.runtime.submitted import GATEWAY_PORT

pytestmark = pytest.mark.unit


def test_jvm_start_settings_are_refused_when_the_jvm_already_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from pipelines.runtime.session import spark_settings

    assert spark_settings(["spark.driver.memory=4g"]) == {"spark.driver.memory": "4g"}
    monkeypatch.setenv(GATEWAY_PORT, "40000")  # what spark-submit sets for its driver
    with pytest.raises(ConfigError, match="pass it to spark-submit's own --conf"):
        spark_settings(["spark.driver.memory=4g"])
    assert spark_settings(["spark.sql.shuffle.partitions=4"]) == {"spark.sql.shuffle.partitions": "4"}
