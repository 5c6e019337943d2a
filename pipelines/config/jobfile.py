"""Job files (`conf/jobs/*.yaml`): one maintenance job — a log directory, what to keep of it, and
the steps to run over it in order — loaded as its one schema (config/job_schema.py) says. A file
is refused before any work with its line and the reason (unknown key, unknown step, missing
path), so a scheduled run never starts half-configured."""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from typing import Any

import yaml

from pipelines.clock import parse_time
from pipelines.config.job import JobConfig
from pipelines.config.job_runtime import airflow_settings, spark_settings
from pipelines.config.job_schema import (
    CLEAN_STEPS,
    CUT_KEYS,
    CUT_SUFFIX,
    ERASE_KEYS,
    ERASED_SUFFIX,
    IN_PLACE_KEYS,
    IN_PLACE_STEPS,
    JOB_KEYS,
    RUN_PLACEHOLDER,
    STEPS,
    WRITING_STEPS,
    AirflowSettings,
    CutSettings,
    EraseSettings,
    InPlaceSettings,
    SparkSettings,
)
from pipelines.config.key_formats import KEY_FORMATS
from pipelines.config.selection import TopicSelection
from pipelines.config.yaml_node import YamlNode, keyed, section
from pipelines.errors import ConfigError
from segment_io.storage import open_storage


@dataclass(frozen=True)
class JobFile:
    """A loaded, checked job file. Paths are absolute (relative ones are read from the file's own
    directory, wherever the job runs from); `{run}` is still in them until `for_run`."""

    path: str
    name: str
    source: str
    steps: tuple[str, ...]
    output: str | None
    remote: str | None
    topics: TopicSelection
    configs: JobConfig
    now_ms: int | None  # the job's fixed `now`, if it sets one
    state: str
    spark: SparkSettings
    airflow: AirflowSettings
    digest: str  # of what the job does (not of comments or layout): a state file belongs to one
    suites: tuple[str, ...] = ()  # the operator's suite files the validate step runs
    erase: EraseSettings | None = None
    cut: CutSettings | None = None
    in_place: InPlaceSettings | None = None  # the steps rewrite the source's Kafka tier, no output

    @property
    def cleans(self) -> bool:
        return any(s in CLEAN_STEPS for s in self.steps)

    @property
    def erases(self) -> bool:
        return "erase" in self.steps

    @property
    def cuts(self) -> bool:
        return "cut" in self.steps

    @property
    def log_dir(self) -> str:
        """The log directory validate and tier work on: the output, or else the source."""
        writes = any(s in WRITING_STEPS for s in self.steps)
        return self.output if writes and self.output else self.source

    @property
    def cut_dir(self) -> str:
        """Where the cut step writes: the output, or beside it where an erase or a clean follows."""
        assert self.output is not None
        return self.output + CUT_SUFFIX if (self.erases or self.cleans) else self.output

    @property
    def erase_source(self) -> str:
        """What the erase step reads: the cut log where the job cuts first, else the source."""
        return self.cut_dir if self.cuts else self.source

    @property
    def erased_dir(self) -> str:
        """Where the erase step writes: the output, or beside it where a clean follows."""
        assert self.output is not None
        return self.output + ERASED_SUFFIX if self.cleans else self.output

    @property
    def clean_source(self) -> str:
        """What the clean steps read: what the step before them wrote (erase, cut), else the source."""
        if self.in_place is not None:
            return self.source
        return self.erased_dir if self.erases else self.erase_source

    @property
    def selection(self) -> TopicSelection | None:
        """The topics the clean pass keeps, None for all."""
        return None if self.topics.everything else self.topics

    def units(self) -> list[tuple[str, ...]]:
        """The steps as they run, in order: retention and compact named together are one pass."""
        units: list[tuple[str, ...]] = []
        for step in self.steps:
            if step in CLEAN_STEPS and units and units[-1][0] in CLEAN_STEPS:
                units[-1] += (step,)
            else:
                units.append((step,))
        return units

    def clean_config(self, unit: tuple[str, ...]) -> JobConfig:
        """The topic configs of a clean unit: a unit of one of retention and compact applies only
        that half of each topic's cleanup.policy (the other is the job's to leave alone)."""
        if len(unit) == 2:
            return self.configs
        return self.configs.only("delete" if unit == ("retention",) else "compact", f"job step {unit[0]}")

    def for_run(self, run: str | None) -> JobFile:
        """The job with `{run}` replaced by the run's name (refused where one is needed and missing)."""
        templated = [v for v in (self.output, self.remote, self.state) if v and RUN_PLACEHOLDER in v]
        if not templated:
            return self
        if not run:
            raise ConfigError(f"{self.path}: its paths hold {RUN_PLACEHOLDER}; name the run with --run NAME")
        if not re.fullmatch(r"[A-Za-z0-9_.:+-]+", run) or run in (".", ".."):
            raise ConfigError(f"--run {run!r}: use letters, digits and _ . : + - only")

        def sub(value: str | None) -> str | None:
            return None if value is None else value.replace(RUN_PLACEHOLDER, run)

        from dataclasses import replace

        return replace(self, output=sub(self.output), remote=sub(self.remote), state=sub(self.state) or "")


def _steps(node: YamlNode) -> tuple[str, ...]:
    if not isinstance(node.node, yaml.SequenceNode) or not node.node.value:
        raise node.refuse(f"steps must be a non-empty list of: {', '.join(STEPS)}")
    steps: list[str] = []
    for item in node.node.value:
        at = YamlNode(node.file, item)
        step = at.string("a step")
        if step not in STEPS:
            raise at.refuse(f"unknown step '{step}' (the steps are: {', '.join(STEPS)})")
        if step in steps:
            raise at.refuse(f"step '{step}' is named twice")
        if steps and STEPS.index(step) < STEPS.index(steps[-1]):
            order = " → ".join(STEPS)
            raise at.refuse(f"step '{step}' cannot run after '{steps[-1]}' (the order is {order})")
        steps.append(step)
    return tuple(steps)


def _resolve(value: str, base: str) -> str:
    """A local path relative to the job file's directory; URLs as they are."""
    if "://" in value:
        return value
    return os.path.normpath(os.path.join(base, os.path.expanduser(value)))


def _exists(url: str) -> bool:

    storage, path = open_storage(url)
    return bool(storage.exists(path))


def _configs(node: YamlNode) -> JobConfig:
    items = node.mapping("configs")
    for name, item in items.items():
        if name not in ("defaults", "topics"):
            raise YamlNode(node.file, item.key_node).refuse(  # type: ignore[attr-defined]
                f"unknown key '{name}' in configs (the keys are: defaults, topics)"
            )
    maps = {"defaults": items["defaults"].mapping("configs.defaults")} if "defaults" in items else {}
    for topic, node_of in (items["topics"].mapping("configs.topics") if "topics" in items else {}).items():
        maps[f"topics.{topic}"] = node_of.mapping(f"configs.topics.{topic}")
    values: dict[str, dict[str, Any]] = {}
    for where, entries in maps.items():
        values[where] = {}
        for name, item in entries.items():
            values[where][name] = item.value()
            try:  # each value on its own first, so a refusal names its line
                JobConfig.build({name: values[where][name]})
            except ConfigError as exc:
                raise item.refuse(str(exc).replace("defaults: ", f"configs.{where}: ", 1)) from None
    topics = {w.removeprefix("topics."): v for w, v in values.items() if w != "defaults"}
    sources = {"*": {n: f"{node.file} configs.defaults" for n in values.get("defaults", {})}}
    sources.update({t: {n: f"{node.file} configs.topics.{t}" for n in v} for t, v in topics.items()})
    try:
        return JobConfig.build(values.get("defaults", {}), topics, sources)
    except ConfigError as exc:  # a rule across configs (max.compaction.lag.ms ≥ min...)
        raise node.refuse(str(exc)) from None


def _default_state(output: str | None, remote: str | None, source: str, in_place: bool) -> str:
    """Beside the output, else the remote tier, else the source; a job in place keeps one per run
    (each run compacts the same tier again)."""
    run = f".{RUN_PLACEHOLDER}" if in_place else ""
    return f"{(output or remote or source).rstrip('/')}{run}.run.json"


def _in_place(
    items: dict[str, YamlNode], steps: tuple[str, ...], kafka_tier: str | None, from_bucket: bool
) -> InPlaceSettings:
    """A job's `in_place` map, with what it needs: a Kafka tier read from the live cluster, and
    only the steps that rewrite it."""
    node = items["in_place"]
    settings = section(node, IN_PLACE_KEYS, "in_place")
    if kafka_tier is None:
        raise node.refuse("in_place rewrites a broker's Kafka tier: give kafka_tier (its settings) too")
    if from_bucket:
        raise items["kafka_tier_from_bucket"].refuse(
            "in_place swaps segments through __remote_log_metadata, which the run reads from the cluster: "
            "not with kafka_tier_from_bucket"
        )
    others = [s for s in steps if s not in IN_PLACE_STEPS]
    if others:
        raise items["steps"].refuse(
            f"with in_place, steps names only {', '.join(IN_PLACE_STEPS)} (not {', '.join(others)}): "
            "the other steps write an output of their own"
        )
    grace = settings["grace_ms"].integer("in_place.grace_ms", 0) if "grace_ms" in settings else None
    return InPlaceSettings(settings["bootstrap_server"].string("in_place.bootstrap_server"), grace)


def load_job_file(path: str, check_source: bool = True) -> JobFile:
    """Read and check a job file; every refusal names the file's line and the reason. Without
    `check_source` nothing outside the file is read (what a scheduler's parser of the file wants:
    the source is checked when a step runs)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ConfigError(f"cannot read job file {path}: {exc.strerror or exc}") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    if root is None:
        raise ConfigError(f"{path}: empty job file")
    top = YamlNode(path, root)
    items = keyed(top, JOB_KEYS, "the job")
    base = os.path.dirname(os.path.abspath(path))
    name = items["name"].string("name")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise items["name"].refuse(f"name {name!r}: use letters, digits and _ . - only")
    steps = _steps(items["steps"])

    def location(key: str) -> str | None:
        return _resolve(items[key].string(key), base) if key in items else None

    source, output, remote = location("source"), location("output"), location("remote")
    assert source is not None
    if check_source and not _exists(source):
        raise items["source"].refuse(f"source {source}: no such log directory")
    kafka_tier = location("kafka_tier")
    from_bucket = "kafka_tier_from_bucket" in items and items["kafka_tier_from_bucket"].boolean(
        "kafka_tier_from_bucket"
    )
    in_place = _in_place(items, steps, kafka_tier, from_bucket) if "in_place" in items else None
    state = location("state") or _default_state(output, remote, source, in_place is not None)
    if from_bucket and kafka_tier is None:
        raise items["kafka_tier_from_bucket"].refuse(
            "kafka_tier_from_bucket says how kafka_tier is read: give kafka_tier too"
        )
    if kafka_tier is not None:
        if check_source and not _exists(kafka_tier):
            raise items["kafka_tier"].refuse(f"kafka_tier {kafka_tier}: no such settings file")
        from segment_io.kafka_tier.url import KafkaTierSource
        from segment_io.remote.view import log_url

        bootstrap = None if in_place is None else in_place.bootstrap_server
        tier = KafkaTierSource(kafka_tier, bootstrap, from_bucket=from_bucket)
        source = log_url(source, kafka_tier=tier)  # every step reads it so
    elif check_source:
        from segment_io.kafka_tier.extent import untiered_read

        hint = untiered_read(*open_storage(source))
        if hint is not None:
            raise items["source"].refuse(hint)
    writes = any(s in WRITING_STEPS for s in steps)
    if in_place is not None and output is not None:
        raise items["output"].refuse("in_place rewrites the source's Kafka tier: such a job has no 'output'")
    if writes and output is None and in_place is None:
        raise items["steps"].refuse(
            "cut, erase, retention and compact write a log directory: the job needs 'output'"
        )
    if not writes and output is not None:
        raise items["output"].refuse(
            "'output' is written only by cut, erase, retention or compact (not in steps)"
        )
    cut = _cut(items["cut"]) if "cut" in items else None
    if ("cut" in steps) != (cut is not None):
        where = items["steps"] if cut is None else items["cut"]
        raise where.refuse("the cut step and the 'cut' map (where it cuts) go together")
    erase = _erase(items.get("erase"), base, check_source) if "erase" in items else None
    if ("erase" in steps) != (erase is not None):
        where = items["steps"] if erase is None else items["erase"]
        raise where.refuse("the erase step and the 'erase' map (its key list) go together")
    for step in ("tier", "expire"):
        if step in steps and remote is None:
            raise items["steps"].refuse(f"step '{step}' works on a remote tier: the job needs 'remote'")
        if step in steps and kafka_tier is not None and not writes:
            raise items["kafka_tier"].refuse(
                f"step '{step}' would work on the source, a broker's log directory read with its Kafka "
                "remote tier: tier an output (add a step that writes one) or the broker's own tiering does it"
            )
    topics = TopicSelection(tuple(items["topics"].strings("topics")) if "topics" in items else ())
    if not topics.everything and not writes:
        raise items["topics"].refuse(
            "topics selects what cut/erase/retention/compact write; steps names none"
        )
    suites = tuple(_resolve(s, base) for s in items["suites"].strings("suites")) if "suites" in items else ()
    if suites and "validate" not in steps:
        raise items["suites"].refuse("suites run in the validate step, which steps does not name")
    for suite in suites:
        if check_source and not _exists(suite):
            raise items["suites"].refuse(f"suite {suite}: no such file")
    configs = _configs(items["configs"]) if "configs" in items else JobConfig()
    now_ms = None
    if "now" in items:
        try:
            now_ms = parse_time(items["now"].string("now"), "now")
        except ConfigError as exc:
            raise items["now"].refuse(str(exc)) from None
    spark = spark_settings(items.get("spark"))
    airflow = airflow_settings(items.get("airflow"))
    what = {
        "source": source,
        "steps": steps,
        "output": output,
        "remote": remote,
        "topics": topics.patterns,
        "configs": {
            "defaults": configs.defaults.to_kafka(),
            "topics": {t: c.to_kafka() for t, c in sorted(configs.topics.items())},
        },
        "now": now_ms,
        "suites": suites,
        "erase": None if erase is None else vars(erase),
        **({} if in_place is None else {"in_place": vars(in_place)}),
        **({} if cut is None else {"cut": vars(cut)}),
    }
    digest = hashlib.sha256(json.dumps(what, sort_keys=True, default=sorted).encode()).hexdigest()[:16]
    return JobFile(
        os.path.abspath(path),
        name,
        source,
        steps,
        output,
        remote,
        topics,
        configs,
        now_ms,
        state,
        spark,
        airflow,
        digest,
        suites,
        erase,
        cut,
        in_place,
    )


def _cut(node: YamlNode) -> CutSettings:
    items = section(node, CUT_KEYS, "cut")
    if ("until_offset" in items) == ("until_time" in items):
        raise node.refuse("cut: exactly one of until_offset and until_time")
    if "until_offset" in items:
        text = items["until_offset"].string("cut.until_offset")
        if not text.isdigit():
            raise items["until_offset"].refuse(f"cut.until_offset {text!r}: an offset (an integer ≥ 0)")
        return CutSettings(until_offset=int(text))

    try:
        return CutSettings(
            until_time=parse_time(items["until_time"].string("cut.until_time"), "cut.until_time")
        )
    except ConfigError as exc:
        raise items["until_time"].refuse(str(exc)) from None


def _erase(node: YamlNode | None, base: str, check_source: bool) -> EraseSettings:
    items = section(node, ERASE_KEYS, "erase")
    keys = _resolve(items["keys"].string("erase.keys"), base)
    if check_source and not _exists(keys):
        raise items["keys"].refuse(f"erase.keys {keys}: no such file")
    key_format = items["key_format"].string("erase.key_format") if "key_format" in items else "utf8"
    if key_format not in KEY_FORMATS:
        raise items["key_format"].refuse(
            f"erase.key_format {key_format!r}: expected one of {', '.join(KEY_FORMATS)}"
        )
    headers = (
        tuple(items["also_in_headers"].strings("erase.also_in_headers")) if "also_in_headers" in items else ()
    )
    secret = (
        _resolve(items["secret_file"].string("erase.secret_file"), base) if "secret_file" in items else None
    )
    if secret is not None and check_source and not _exists(secret):
        raise items["secret_file"].refuse(f"erase.secret_file {secret}: no such file")
    return EraseSettings(keys, key_format, headers, secret)
