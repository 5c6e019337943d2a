"""Typed errors raised in Spark tasks come back typed on the driver, from the worker's traceback
text the Spark exception carries."""

from __future__ import annotations

import pytest

from pipelines.errors import ConfigError
from pipelines.runtime.remote_errors import typed_error_in, typed_errors
from segment_io.errors import CorruptBatch

pytestmark = pytest.mark.unit

TRACEBACK = """org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/work/pipelines/keys/key_list.py", line 180, in read
{last}
"""


def test_a_key_lists_refusal_in_a_task_is_a_config_error_on_the_driver() -> None:
    exc = RuntimeError(
        TRACEBACK.format(last="pipelines.errors.ConfigError: --keys k.csv: not a readable csv")
    )
    typed = typed_error_in(exc)
    assert isinstance(typed, ConfigError) and str(typed) == "--keys k.csv: not a readable csv"
    with pytest.raises(ConfigError, match="not a readable csv"), typed_errors():
        raise exc


def test_only_known_errors_are_rebuilt() -> None:
    assert typed_error_in(RuntimeError(TRACEBACK.format(last="pipelines.errors.Nonesuch: x"))) is None
    assert typed_error_in(RuntimeError(TRACEBACK.format(last="ValueError: x"))) is None
    corrupt = CorruptBatch("/d/t-0/00000000000000000000.log", 61, "CRC mismatch")
    typed = typed_error_in(RuntimeError(TRACEBACK.format(last=f"segment_io.errors.CorruptBatch: {corrupt}")))
    assert isinstance(typed, CorruptBatch) and str(typed) == str(corrupt)
