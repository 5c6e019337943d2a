"""The operator's own suites: great-expectations 1.x `ExpectationSuite` files (JSON, as GE saves
them) run over the data records of the topics each names. How a record reads is the suite's to
say, in its `meta.segpipe`:

    {"topics": ["orders"],          the topics it judges (required)
     "key": "utf8",                 bytes (default), utf8 or json
     "value": "json",
     "value_fields": ["id"]}        json: a string column per field, `value_id` (null when the
                                    value is no JSON object or lacks the field)

Columns: topic, partition, offset, timestamp, key, value, headers, the fields, and key_b64 (the key
in base64, as failures name it). Control markers are not records of the topic and are left out;
tombstones are in, with a null value."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pipelines.errors import ConfigError
from pipelines.runtime.session import with_sources
from pipelines.runtime.spark_handle import Spark
from segment_io.storage import open_storage

DECODINGS = ("bytes", "utf8", "json")
BASE_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value", "headers", "key_b64")
# The keyword arguments of an expectation that name columns.
COLUMN_KWARGS = ("column", "column_A", "column_B")
COLUMN_LIST_KWARGS = ("column_list",)


@dataclass(frozen=True)
class UserSuite:
    """One suite file, read and checked: where it came from, what it judges and how records read."""

    path: str
    name: str
    topics: tuple[str, ...]
    key: str
    value: str
    key_fields: tuple[str, ...]
    value_fields: tuple[str, ...]
    document: dict[str, Any]  # the suite as GE saved it

    @property
    def columns(self) -> tuple[str, ...]:
        fields = [f"key_{f}" for f in self.key_fields] + [f"value_{f}" for f in self.value_fields]
        return (*BASE_COLUMNS, *fields)

    def expectations(self) -> list[dict[str, Any]]:
        """The suite's expectations, each named in failures by `meta.rule` or else by suite, type
        and column."""
        out = []
        for item in self.document.get("expectations", []):
            kwargs = item.get("kwargs", {})
            column = kwargs.get("column") or ",".join(kwargs.get("column_list", []))
            rule = f"{self.name}: {item.get('type')}" + (f"({column})" if column else "")
            out.append({**item, "meta": {"rule": rule, **(item.get("meta") or {})}})
        return out


def load_suite(path: str) -> UserSuite:
    """Read a suite file (a path or URL); refused with the file named when it is not a suite GE
    saved, lacks `meta.segpipe.topics`, decodes a way segpipe does not know, or names a column
    its records do not have."""
    storage, where = open_storage(path)
    try:
        doc = json.loads(storage.read(where))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"suite {path}: cannot read it as JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("expectations"), list):
        raise ConfigError(f"suite {path}: not a great-expectations ExpectationSuite (no 'expectations' list)")
    meta = (doc.get("meta") or {}).get("segpipe")
    if not isinstance(meta, dict) or not meta.get("topics"):
        raise ConfigError(
            f'suite {path}: its meta needs "segpipe": {{"topics": [...]}} (the topics it judges)'
        )
    unknown = sorted(set(meta) - {"topics", "key", "value", "key_fields", "value_fields"})
    if unknown:
        raise ConfigError(f"suite {path}: unknown meta.segpipe key {', '.join(unknown)}")
    decoding = {part: str(meta.get(part, "bytes")) for part in ("key", "value")}
    for part, how in decoding.items():
        if how not in DECODINGS:
            raise ConfigError(
                f"suite {path}: meta.segpipe.{part} {how!r}: expected one of {', '.join(DECODINGS)}"
            )
        if meta.get(f"{part}_fields") and how != "json":
            raise ConfigError(f"suite {path}: meta.segpipe.{part}_fields needs {part}: json")
    suite = UserSuite(
        path,
        str(doc.get("name") or path),
        tuple(str(t) for t in meta["topics"]),
        decoding["key"],
        decoding["value"],
        tuple(str(f) for f in meta.get("key_fields", [])),
        tuple(str(f) for f in meta.get("value_fields", [])),
        doc,
    )
    for item in doc["expectations"]:
        kwargs = item.get("kwargs", {}) if isinstance(item, dict) else {}
        named = [kwargs[k] for k in COLUMN_KWARGS if k in kwargs]
        named += [c for k in COLUMN_LIST_KWARGS for c in kwargs.get(k, [])]
        missing = [c for c in named if c not in suite.columns]
        if missing:
            raise ConfigError(
                f"suite {path}: {item.get('type')} names column {', '.join(missing)}, which its records do "
                f"not have (columns: {', '.join(suite.columns)})"
            )
    for number, item in enumerate(suite.expectations(), start=1):
        _require_buildable(path, number, item)
    return suite


def _require_buildable(path: str, number: int, item: Any) -> None:
    """Refuse an expectation great-expectations cannot build (an unknown type, bad arguments): GE
    itself only logs such an expectation and leaves it out of the suite, which would then pass
    without ever judging it."""
    import great_expectations as gx  # noqa: F401  (registers GE's expectations)
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    kind = item.get("type") if isinstance(item, dict) else None
    try:
        if not isinstance(kind, str):
            raise ValueError("no 'type'")
        ExpectationConfiguration(**item).to_domain_obj()
    except Exception as exc:  # GE's and pydantic's errors alike: the file is at fault
        message = getattr(exc, "message", None) or str(exc).splitlines()[0]
        raise ConfigError(
            f"suite {path}: expectation {number} ({kind or 'without a type'}) cannot be built by "
            f"great-expectations: {message}"
        ) from None


def require_topics(suites: tuple[UserSuite, ...], present: set[str], path: str) -> None:
    """Refuse a suite naming a topic the log does not hold (a misspelt name would judge nothing)."""
    for suite in suites:
        missing = sorted(set(suite.topics) - present)
        if missing:
            there = ", ".join(sorted(present)) or "none"
            raise ConfigError(
                f"suite {suite.path} names topic {', '.join(missing)}, which {path} does not hold "
                f"(topics there: {there})"
            )


def gx_suite(gx: Any, suite: UserSuite, index: int) -> Any:
    """The suite as a GE object, under a name of its own in the run's context."""
    expectations = suite.expectations()
    try:
        built = gx.ExpectationSuite(
            name=f"user-{index}-{suite.name}", expectations=expectations, meta=suite.document.get("meta")
        )
    except Exception as exc:  # GE's own errors for a bad expectation: the file is at fault
        raise ConfigError(f"suite {suite.path}: {exc}") from None
    # GE leaves out, with a log line only, an expectation it cannot build: a suite is run whole or
    # not at all (load_suite refuses such a file first; this holds the line for any other caller).
    if len(built.expectations) != len(expectations):
        raise ConfigError(
            f"suite {suite.path}: great-expectations built {len(built.expectations)} of its "
            f"{len(expectations)} expectations"
        )
    return built


def records_frame(spark: Spark, url: str, suite: UserSuite, partition_dirs: list[str]) -> Any:
    """The data records of `suite`'s topics in `partition_dirs`, decoded as the suite says."""
    from pyspark.sql import functions as F

    frame = (
        with_sources(spark)
        .read.format("kafka-segments")
        .option("topic", ",".join(suite.topics))
        .option("partitions", ",".join(partition_dirs))
        .option("verifyCrc", "false")  # the structure suite has checked every CRC
        .load(url)
        .where(~F.col("is_control"))
    )
    columns = [F.col(c) for c in ("topic", "partition", "offset", "timestamp", "headers")]
    for part, fields in (("key", suite.key_fields), ("value", suite.value_fields)):
        raw = F.col(part)
        text = raw.cast("string")
        columns.append(raw.alias(part) if getattr(suite, part) == "bytes" else text.alias(part))
        columns += [F.get_json_object(text, f"$.{f}").alias(f"{part}_{f}") for f in fields]
    return frame.select(*columns, F.base64("key").alias("key_b64"))
