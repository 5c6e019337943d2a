"""The great-expectations suites, one function per expectation set: each expectation names the
rule it judges (`meta.rule`), and a failure lists the rows that broke it."""

from __future__ import annotations

from typing import Any

from pipelines.jobs.validate.checks import FILE_RULES, RECORD_RULES
from pipelines.jobs.validate.promise import PROMISE_RULES


def _in_true(gx: Any, column: str, rule: str) -> Any:
    return gx.expectations.ExpectColumnValuesToBeInSet(column=column, value_set=[True], meta={"rule": rule})


def file_structure_suite(gx: Any) -> Any:
    """Per partition: batch CRCs, batch framing, indexes against the log, segment offset ranges."""
    suite = gx.ExpectationSuite(name="segpipe-files")
    for rule in FILE_RULES:
        suite.add_expectation(_in_true(gx, rule, rule))
    return suite


def manifest_suite(gx: Any) -> Any:
    """Per partition: the output holds what its manifest recorded at publication."""
    suite = gx.ExpectationSuite(name="segpipe-manifest")
    suite.add_expectation(_in_true(gx, "manifest_matches", "manifest_matches"))
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


def promise_claims_suite(gx: Any) -> Any:
    """The output's log start offset and cleaner checkpoint are ones the rules justify."""
    suite = gx.ExpectationSuite(name="segpipe-promise-claims")
    suite.add_expectation(_in_true(gx, "checkpoints_justified", "checkpoints_justified"))
    return suite


def promise_counts_suite(gx: Any) -> Any:
    """Records in = kept + removed by reason, as the run report says and as counted."""
    suite = gx.ExpectationSuite(name="segpipe-promise-counts")
    suite.add_expectation(_in_true(gx, "counts_match", "counts_match"))
    return suite
