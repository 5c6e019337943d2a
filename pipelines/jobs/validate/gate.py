"""The validation gate of `clean --validate`: the structure suites over the staged output before
it is published. A failure raises ValidationFailed (exit 4; the run publishes nothing) and keeps
the Data Docs beside DST (`DST.validation/`, or a local temporary folder for an object-store DST)."""

from __future__ import annotations

import os
import posixpath
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from pipelines.config.terms import Gate, Terms
from pipelines.errors import ValidationFailed
from pipelines.jobs.validate.job import run_validate
from pipelines.jobs.validate.request import ValidateRequest
from pipelines.jobs.validate.user_suites import UserSuite
from pipelines.runtime.spark_handle import Spark
from segment_io.layout import META_DIR
from segment_io.storage import LocalStorage, Location, Place

VALIDATION_DIR = posixpath.join(META_DIR, "validation")


def promise_gate_for(spark: Spark, log: Callable[[str], Any] = print) -> Callable[[Place, Place], Gate]:
    """`gate_for(staged, source)`: the gate of a staged log proved against what it was made from
    (validate --against), for a run that stages where it learns its source only as it runs."""

    def gate_for(staged: Place, source: Place) -> Gate:
        return validation_gate(spark, staged, log, against=source)

    return gate_for


def validation_gate(
    spark: Spark,
    dst: Place,
    log: Callable[[str], Any] = print,
    against: Place | None = None,
    suites: tuple[UserSuite, ...] = (),
) -> Gate:
    """A `gate` for `clean`: validates the staged output (and, `against` SRC, the promise under the
    run's own terms); on success its Data Docs go into the output (`DST/_segpipe/validation/`)."""

    final = Location.of(dst)
    source = Location.of_optional(against)

    def gate(staged: Location, terms: Terms) -> None:
        if isinstance(final.storage, LocalStorage):
            docs = f"{final.path}.validation"
            shutil.rmtree(docs, ignore_errors=True)
        else:
            docs = tempfile.mkdtemp(prefix="segpipe-validation-")
        request = ValidateRequest(
            path=staged, report_dir=docs, against=source, staged=True, terms=terms, suites=suites
        )
        result = run_validate(spark, request, log)
        if not result.success:
            for line in result.lines():
                log(line)
            broken = sum(1 for n in result.failed.values() if n)
            raise ValidationFailed(
                f"validation failed: the output broke {broken} rules and was not published; "
                f"Data Docs: {os.path.join(docs, 'index.html')}"
            )
        target = staged.file(VALIDATION_DIR)
        if isinstance(staged.storage, LocalStorage):
            os.rename(docs, target)
        else:
            for root, _, names in os.walk(docs):
                for name in names:
                    local = os.path.join(root, name)
                    with open(local, "rb") as handle:
                        staged.storage.write_atomic(
                            posixpath.join(target, os.path.relpath(local, docs)), handle.read()
                        )
            shutil.rmtree(docs, ignore_errors=True)
        log(f"segpipe: validation passed: {len(result.checked)} rules in {result.seconds:.1f} s")

    return gate
