"""The operator's own suites: a great-expectations suite file, as GE saves it, judges the records
of the topics its meta names, decoded as it says; a failure names the row; a file that cannot be
run as written is refused with its name and the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.errors import ConfigError
from pipelines.jobs.validate import validate
from pipelines.jobs.validate.user_suites import load_suite
from tests.helpers import read_log, v2_batch, write_log

pytestmark = pytest.mark.spark
T = 1_700_000_000_000
SAMPLE_SUITE = "conf/suites/orders.json"


def saved_suite(path: Path, expectations: list[dict], segpipe: dict | None) -> str:  # type: ignore[type-arg]
    """A suite file in the shape great-expectations 1.x saves (`ExpectationSuite.to_json_dict`)."""
    import great_expectations as gx

    suite = gx.ExpectationSuite(name=path.stem, expectations=expectations, meta={"segpipe": segpipe})
    path.write_text(json.dumps(suite.to_json_dict()))
    return str(path)


def test_the_bundled_suite_passes_on_the_samples(spark, sample_dir: Path) -> None:  # type: ignore[no-untyped-def]
    report = validate(spark, str(sample_dir), suites=(load_suite(SAMPLE_SUITE),))
    assert report.success, report.lines()
    orders = sum(
        1 for p in ("orders-0", "orders-1") for r in read_log(sample_dir, p) if not r.get("is_control")
    )
    assert report.checked["orders: expect_column_values_to_match_regex(key)"] == orders


def test_a_failing_suite_names_its_rows(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    values = [b'{"id": 1}', b'{"id": 2, "x": true}', b"not json", b'{"name": "no id"}', None]
    batch = v2_batch(0, [(i, T + i, b"k%d" % i, v, []) for i, v in enumerate(values)])
    write_log(tmp_path / "log", "events-0", [[batch]])
    path = saved_suite(
        tmp_path / "events.json",
        [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "value_id"}}],
        {"topics": ["events"], "key": "utf8", "value": "json", "value_fields": ["id"]},
    )
    report = validate(spark, str(tmp_path / "log"), suites=(load_suite(path),))
    assert not report.success
    rule = "events: expect_column_values_to_not_be_null(value_id)"
    assert report.failed == {**{r: 0 for r in report.checked}, rule: 3}
    assert sorted((f.partition, f.offset, f.key) for f in report.failures) == [
        ("events-0", 2, "azI="),
        ("events-0", 3, "azM="),
        ("events-0", 4, "azQ="),
    ]
    assert any(
        line.startswith(f"segpipe: validation failed: {rule}: partition events-0 offset 2")
        for line in report.lines()
    )


def test_suites_that_cannot_run_as_written_are_refused(tmp_path: Path) -> None:
    no_meta = saved_suite(
        tmp_path / "plain.json",
        [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "key"}}],
        None,
    )
    with pytest.raises(ConfigError, match=r"plain.json: its meta needs \"segpipe\""):
        load_suite(no_meta)
    typo = saved_suite(
        tmp_path / "typo.json",
        [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "valeu"}}],
        {"topics": ["orders"]},
    )
    with pytest.raises(
        ConfigError, match=r"typo.json: expect_column_values_to_not_be_null names column valeu"
    ):
        load_suite(typo)
    fields = saved_suite(tmp_path / "fields.json", [], {"topics": ["orders"], "value_fields": ["id"]})
    with pytest.raises(ConfigError, match=r"value_fields needs value: json"):
        load_suite(fields)
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(ConfigError, match=r"broken.json: cannot read it as JSON"):
        load_suite(str(tmp_path / "broken.json"))


def test_a_suite_naming_a_topic_the_log_lacks_is_refused(spark, sample_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = saved_suite(tmp_path / "ordrs.json", [], {"topics": ["ordrs"]})
    with pytest.raises(
        ConfigError, match=r"names topic ordrs, which .* does not hold \(topics there: clicks"
    ):
        validate(spark, str(sample_dir), suites=(load_suite(path),))


def test_an_expectation_great_expectations_cannot_build_refuses_the_suite(tmp_path: Path) -> None:
    """GE only logs an expectation it does not know and drops it: the suite would pass unjudged."""
    doc = json.loads(Path(SAMPLE_SUITE).read_text())
    doc["expectations"].append({"type": "expect_column_values_to_be_purple", "kwargs": {"column": "key"}})
    purple = tmp_path / "purple.json"
    purple.write_text(json.dumps(doc))
    with pytest.raises(
        ConfigError, match=r"purple.json: expectation 4 \(expect_column_values_to_be_purple\) cannot be built"
    ):
        load_suite(str(purple))
    doc["expectations"][-1] = {
        "type": "expect_column_values_to_be_between",
        "kwargs": {"column": "key", "strict_min": "x"},
    }
    (tmp_path / "bad-args.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=r"expectation 4 \(expect_column_values_to_be_between\)"):
        load_suite(str(tmp_path / "bad-args.json"))


def test_a_failed_table_rule_is_named_with_what_it_observed(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    batch = v2_batch(0, [(i, T + i, b"k%d" % i, b"v", []) for i in range(12)])
    write_log(tmp_path / "log", "events-0", [[batch]])
    rules = [
        {"type": "expect_table_row_count_to_equal", "kwargs": {"value": 13}},
        {"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 1, "max_value": 20}},
        {"type": "expect_column_max_to_be_between", "kwargs": {"column": "offset", "max_value": 5}},
    ]
    path = saved_suite(tmp_path / "events.json", rules, {"topics": ["events"], "key": "utf8"})
    report = validate(spark, str(tmp_path / "log"), suites=(load_suite(path),))
    assert not report.success
    equal = next(r for r in report.checked if "expect_table_row_count_to_equal" in r)
    between = next(r for r in report.checked if "expect_table_row_count_to_be_between" in r)
    maximum = next(r for r in report.checked if "expect_column_max_to_be_between" in r)
    assert (report.failed[equal], report.failed[between], report.failed[maximum]) == (1, 0, 1)
    assert f"segpipe: validation failed: {equal}: observed 12; expected value=13" in report.lines()
    said = f"segpipe: validation failed: {maximum}: observed 11; expected column='offset', max_value=5"
    assert any(line.startswith(said) for line in report.lines())
    assert "(2 of " in report.summary_line() and "rules broken" in report.summary_line()
