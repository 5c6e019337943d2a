"""The great-expectations suites, one function per expectation set: each expectation names the
rule it judges (`meta.rule`), and a failure lists the rows that broke it."""

from __future__ import annotations

from typing import Any

from pipelines.jobs.validate.checks import FILE_RULES, RECORD_RULES


def _in_true(gx: Any, column: str, rule: str) -> Any:
    return gx.expectations.ExpectColumnValuesToBeInSet(column=column, value_set=[True], meta={"rule": rule})


def file_structure_suite(gx: Any) -> Any:
    """Per partition: batch CRCs, batch framing, indexes against the log, segment offset ranges."""
    suite = gx.ExpectationSuite(name="segpipe-files")
    for rule in FILE_RULES:
        suite.add_expectation(_in_true(gx, rule, rule))
    return suite


def record_structure_suite(gx: Any) -> Any:
    """Per record: offsets, bounds, timestamps, control batches, keys of the cleaned section."""
    suite = gx.ExpectationSuite(name="segpipe-records")
    suite.add_expectation(
        gx.expectations.ExpectColumnValuesToNotBeNull(column="offset", meta={"rule": "offset_present"})
    )
    for rule in RECORD_RULES:
        suite.add_expectation(_in_true(gx, rule, rule))
    return suite


def promise_records_suite(gx: Any) -> Any:
    """Every output record is a source record, byte for byte, at its offset."""
    suite = gx.ExpectationSuite(name="segpipe-promise-records")
    suite.add_expectation(_in_true(gx, "record_from_source", "record_from_source"))
    return suite


def promise_keys_suite(gx: Any) -> Any:
    """Every key's latest value in the cleaned section survived."""
    suite = gx.ExpectationSuite(name="segpipe-promise-keys")
    suite.add_expectation(_in_true(gx, "latest_value_kept", "latest_value_kept"))
    return suite


def promise_counts_suite(gx: Any) -> Any:
    """Records in = kept + removed by reason, as the run report says and as counted."""
    suite = gx.ExpectationSuite(name="segpipe-promise-counts")
    suite.add_expectation(_in_true(gx, "counts_match", "counts_match"))
    return suite
