"""The gate an erased output passes before it is published, or that proves it afterwards: the
erase's proof (pipelines.jobs.erase.proof) against its source, its failures said line by line and
raised as ValidationFailed. One gate for `erase --validate`, `validate --erased` and a job file's
erase step with validate."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipelines.errors import ValidationFailed
from pipelines.jobs.erase.proof import failures, prove_erasure
from pipelines.keys.key_list import KeyList
from pipelines.keys.key_set import ErasedKeys
from pipelines.runtime.spark_handle import Spark
from segment_io.storage import Place

Log = Callable[[str], None]


def erasure_gate(
    spark: Spark,
    src: Place,
    header_names: tuple[str, ...],
    topics: Callable[[str], bool] | None = None,
    say: Log = print,
) -> Callable[[Place, Any], None]:
    """The proof of an erased output against SRC (of the `topics` selected)."""
    names = ErasedKeys.of([n.encode() for n in header_names]) if header_names else None

    def gate(staged: Place, keys: ErasedKeys | KeyList) -> None:
        verdicts = prove_erasure(spark, staged, src, keys, names, topics)
        problems = list(failures(verdicts))
        for line in problems:
            say(f"segpipe: erasure proof failed: {line}")
        if problems:
            raise ValidationFailed(
                f"the output is not SRC minus the listed keys' records ({len(problems)} problems)"
            )
        gone = sum(v.erased for v in verdicts)
        say(
            f"segpipe: erasure proved: {gone:,} records of listed keys gone, every other record of SRC "
            f"unchanged ({len(verdicts)} partitions)"
        )

    return gate
