"""The great-expectations suites, one function per expectation set: each expectation names the
rule it judges (`meta.rule`), and a failure lists the rows that broke it."""

from __future__ import annotations

from typing import Any

from pipelines.jobs.validate.checks import RECORD_RULES
from pipelines.jobs.validate.promise import PROMISE_RULES


def _in_true(gx: Any, column: str, rule: str) -> Any:
    return gx.expectations.ExpectColumnValuesToBeInSet(column=column, value_set=[True], meta={"rule": rule})


def partition_suite(gx: Any, rules: list[str]) -> Any:
    """Per partition: its files (batch CRCs, framing, indexes, segment offset ranges), and where they
    apply the manifest's inventory, the checkpoints the source justifies, the run report's counts."""
    suite = gx.ExpectationSuite(name="segpipe-partitions")
    for rule in rules:
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


def promise_suite(gx: Any) -> Any:
    """Output records come from the source unchanged; what the rules keep is kept; what the
    output's cleaned section claims removed is gone (each row judges the rules of its kind)."""
    suite = gx.ExpectationSuite(name="segpipe-promise")
    for rule in PROMISE_RULES:
        suite.add_expectation(_in_true(gx, rule, rule))
    return suite
