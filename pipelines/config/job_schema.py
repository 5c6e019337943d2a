"""The job file's schema: the steps a job may name and every key it may hold (`JOB_KEYS` and the
sections' keys), each with its type and meaning, and the settings the sections load into. The
loader (config/jobfile.py), `segpipe run --schema` and the README's table all read it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# The steps a job may name, in the only order they can run: a cut takes the log back to a moment
# first (Kafka's truncation comes before its cleaning), erasure takes listed keys out next
# (what a clean keeps must not bring them back), retention and compaction make the output (one
# pass over the data when both are named: Kafka applies both in one cleaning cycle), validation
# proves it before tiering moves it, expiry deletes what tiering left unreferenced.
STEPS = ("cut", "erase", "retention", "compact", "validate", "tier", "expire")
WRITING_STEPS = ("cut", "erase", "retention", "compact")
CLEAN_STEPS = ("retention", "compact")
# What a job with `in_place` runs: a compaction of a Kafka tier's remote segments while the
# cluster serves them (retention stays the broker's; the other steps write an output).
IN_PLACE_STEPS = ("compact",)
RUN_PLACEHOLDER = "{run}"
# Where an erase followed by a clean writes, beside the output (kept: validate proves the clean from
# it); likewise a cut followed by an erase or a clean (removed once an erase is done: it holds the
# listed keys' records, run/runner.py release_cut).
ERASED_SUFFIX = ".erased"
CUT_SUFFIX = ".cut"


@dataclass(frozen=True)
class Key:
    """One key of the schema: its name, type (as the README writes it), and meaning."""

    name: str
    type: str
    doc: str
    required: bool = False


JOB_KEYS: tuple[Key, ...] = (
    Key("name", "string", "the job's name ([A-Za-z0-9_.-]); its DAG is `segpipe_<name>`", required=True),
    Key("source", "path or URL", "the log directory the job reads; no step modifies it", required=True),
    Key("steps", "list", f"what runs, in this order: any of {', '.join(STEPS)}", required=True),
    Key(
        "output",
        "path or URL",
        "where cut/erase/retention/compact write the log directory (absent or "
        f"empty); `{RUN_PLACEHOLDER}` is replaced by the run's name; a cut followed by another of them "
        f"writes `<output>{CUT_SUFFIX}`, an erase followed by retention or compact "
        f"`<output>{ERASED_SUFFIX}`, which the next reads. Needed by cut, erase, retention and compact",
    ),
    Key("remote", "URL", "the remote tier that tier writes and expire prunes. Needed by tier and expire"),
    Key(
        "kafka_tier",
        "path or URL",
        "the source is a Kafka broker's log directory whose tiered topics "
        "(KIP-405) are read with their remote segments: the broker's tiered-storage settings (its "
        "server.properties, or its remote.*, rlmm.* and rsm.* lines), as `--kafka-tier`. Not with tier "
        "or expire on the source itself",
    ),
    Key(
        "kafka_tier_from_bucket",
        "true or false",
        "with kafka_tier: the remote segments found in the "
        "storage itself, not in __remote_log_metadata (the topic rebuilt when its metadata topic is "
        "lost), as `--from-bucket`; default false",
    ),
    Key(
        "in_place",
        "map",
        "with kafka_tier: the compact step rewrites the tier's remote segments in place while "
        "the cluster serves them, as `clean --in-place --kafka-tier` (keys below); no output, and "
        f"steps names only {', '.join(IN_PLACE_STEPS)}; the state file defaults to "
        f"`<source>.{RUN_PLACEHOLDER}.run.json`, so each scheduled run compacts anew",
    ),
    Key("topics", "list", "topic names or globs (`orders`, `cdc.*`) the output keeps; default: every topic"),
    Key("cut", "map", "where the cut step cuts each partition (keys below). Needed by cut"),
    Key("erase", "map", "what the erase step removes (keys below). Needed by erase"),
    Key(
        "suites",
        "list",
        "great-expectations suite files (JSON, as GE saves them; paths or URLs) the "
        "validate step also runs over the records of the topics each names. Needs validate",
    ),
    Key("configs", "map", "Kafka topic configs: `defaults:` and `topics:` maps, as in `--config` files"),
    Key(
        "now",
        "epoch ms or ISO-8601",
        "the `now` of every time rule; default: the clock when the run first "
        "starts (kept in the state file, so a resumed run uses the same; `tier` then refuses to delete by "
        "Kafka's default retention.ms). Expiry's grace period runs on the wall clock either way",
    ),
    Key(
        "state",
        "path or URL",
        "the run's state file; default: beside the output (`<output>.run.json`), "
        "else beside the remote tier, else beside the source",
    ),
    Key("spark", "map", "how steps run on Spark (keys below)"),
    Key("airflow", "map", "how the maintenance DAG schedules the job (keys below)"),
)
CUT_KEYS: tuple[Key, ...] = (
    Key("until_offset", "integer ≥ 0", "keep each partition's batches that end below this offset"),
    Key(
        "until_time",
        "epoch ms or ISO-8601",
        "cut each partition at its first record at or after this time "
        "(Kafka's ListOffsets); one of until_offset and until_time",
    ),
)
ERASE_KEYS: tuple[Key, ...] = (
    Key(
        "keys",
        "path or URL",
        "the key list: one key per line, or a Parquet or CSV file with a `key` column",
        required=True,
    ),
    Key("key_format", "string", "utf8 (the default), hex or base64: how a key is written in a text list"),
    Key("also_in_headers", "list", "header names: a record whose header carries a listed key goes too"),
    Key(
        "secret_file",
        "path or URL",
        "a file holding the secret (≥ 16 bytes) the evidence names keys under "
        "(HMAC-SHA-256); default: one made for the run and kept nowhere",
    ),
)
IN_PLACE_KEYS: tuple[Key, ...] = (
    Key(
        "bootstrap_server",
        "HOST:PORT[,...]",
        "the live cluster whose tier is rewritten (`--bootstrap-server`)",
        required=True,
    ),
    Key(
        "grace_ms",
        "integer ≥ 0",
        "how long an old segment stays served beside its successor, for the fetches in flight "
        "(`--grace-ms`; default 60000)",
    ),
)
SPARK_KEYS: tuple[Key, ...] = (
    Key("master", "string", "Spark master for `segpipe run` (default: local[*]; spark-submit's own wins)"),
    Key("connection", "string", "the Airflow Spark connection the DAG submits with (default: spark_default)"),
    Key("conf", "map", "Spark settings (`spark.*`) for every step"),
)
AIRFLOW_KEYS: tuple[Key, ...] = (
    Key("schedule", "string", "cron expression or preset (default: @daily)"),
    Key("start_date", "ISO-8601 date", "first logical date (default: 2026-01-01)"),
    Key("retries", "integer ≥ 0", "retries of a failed step task (default: 2)"),
    Key("retry_delay_minutes", "integer ≥ 0", "wait before a retry (default: 5)"),
    Key("timeout_minutes", "integer ≥ 1", "a step task's time-out (default: 120)"),
)


@dataclass(frozen=True)
class CutSettings:
    until_offset: int | None = None
    until_time: int | None = None


@dataclass(frozen=True)
class EraseSettings:
    keys: str
    key_format: str = "utf8"
    also_in_headers: tuple[str, ...] = ()
    secret_file: str | None = None


@dataclass(frozen=True)
class InPlaceSettings:
    bootstrap_server: str
    grace_ms: int | None = None  # None: the swap's own default


@dataclass(frozen=True)
class SparkSettings:
    master: str | None = None
    connection: str = "spark_default"
    conf: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class AirflowSettings:
    schedule: str = "@daily"
    start_date: str = "2026-01-01"
    retries: int = 2
    retry_delay_minutes: int = 5
    timeout_minutes: int = 120


def schema_table() -> list[str]:
    """The schema as Markdown table rows (the README's table is checked against these)."""
    rows = ["| key | type | meaning |", "|---|---|---|"]
    for prefix, keys in (
        ("", JOB_KEYS),
        ("cut.", CUT_KEYS),
        ("erase.", ERASE_KEYS),
        ("in_place.", IN_PLACE_KEYS),
        ("spark.", SPARK_KEYS),
        ("airflow.", AIRFLOW_KEYS),
    ):
        for k in keys:
            rows.append(f"| `{prefix}{k.name}`{' (required)' if k.required else ''} | {k.type} | {k.doc} |")
    return rows
