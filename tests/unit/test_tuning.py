"""The tuning settings (pipelines/config/tuning.py): one table, read from the environment, a bad
value refused naming its variable, and the README's table is the table."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.config.tuning import DRIVER_WORK, KEY_BROADCAST, MASTER, TUNING, tuned, tuning_table
from pipelines.errors import ConfigError

pytestmark = pytest.mark.unit
README = Path(__file__).resolve().parents[2] / "README.md"


def test_each_setting_has_its_default_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    for setting in TUNING:
        monkeypatch.delenv(setting.env, raising=False)
    assert (tuned(DRIVER_WORK), tuned(KEY_BROADCAST), tuned(MASTER)) == ("on", 32 * 2**20, "local[*]")


def test_a_variable_sets_its_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DRIVER_WORK.env, "processes")
    monkeypatch.setenv(KEY_BROADCAST.env, "0")
    monkeypatch.setenv(MASTER.env, " local[2] ")
    assert (tuned(DRIVER_WORK), tuned(KEY_BROADCAST), tuned(MASTER)) == ("processes", 0, "local[2]")


@pytest.mark.parametrize(
    ("setting", "value"),
    [(DRIVER_WORK, "sometimes"), (KEY_BROADCAST, "-1"), (KEY_BROADCAST, "32MiB"), (MASTER, " ")],
)
def test_a_bad_value_is_refused_naming_its_variable(
    monkeypatch: pytest.MonkeyPatch, setting: object, value: str
) -> None:
    env = setting.env
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError, match=env):
        tuned(setting)  # type: ignore[arg-type]


def test_the_readmes_table_is_the_table() -> None:
    text = README.read_text()
    section = text[text.index("### Tuning") :]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    assert rows[: len(tuning_table())] == tuning_table()
