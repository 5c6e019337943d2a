"""Job files: what `segpipe run` accepts, and every refusal naming its line and reason."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipelines.config.job_schema import schema_table
from pipelines.config.jobfile import load_job_file
from pipelines.config.selection import TopicSelection
from pipelines.errors import ConfigError
from pipelines.run.runner import clean_request, tier_request, validate_request
from pipelines.run.state import open_state
from segment_io.storage import Location

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]

GOOD = """\
name: nightly
source: logs
output: out/{run}
remote: remote
topics: [orders, "legacy-*"]
steps: [retention, compact, validate, tier, expire]
configs:
  defaults:
    retention.ms: -1
  topics:
    orders:
      cleanup.policy: compact
spark:
  conf:
    spark.task.maxFailures: 4
"""


def _job(tmp_path: Path, text: str) -> Path:
    (tmp_path / "logs").mkdir(exist_ok=True)
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path


def test_a_good_job_file_resolves_paths_from_its_own_directory(tmp_path: Path) -> None:
    job = load_job_file(str(_job(tmp_path, GOOD))).for_run("2026-11-24")
    assert job.source == str(tmp_path / "logs")
    assert job.output == str(tmp_path / "out" / "2026-11-24")
    assert job.state == str(tmp_path / "out" / "2026-11-24.run.json")
    assert job.units() == [("retention", "compact"), ("validate",), ("tier",), ("expire",)]
    assert job.topics == TopicSelection(("orders", "legacy-*"))
    assert job.topics("legacy-users") and not job.topics("clicks")
    assert job.configs.for_topic("orders").compact and job.configs.defaults.retention_ms == -1
    assert dict(job.spark.conf) == {"spark.task.maxFailures": "4"}


def test_one_half_of_the_cleanup_policy(tmp_path: Path) -> None:
    job = load_job_file(str(_job(tmp_path, GOOD.replace("[retention, compact,", "[retention,"))))
    retention = job.clean_config(("retention",))
    # orders is compact-only: a retention-only pass carries it over whole.
    orders = retention.for_topic("orders")
    assert orders.cleanup_policy == {"delete"} and orders.retention_ms == -1 and orders.retention_bytes == -1
    assert retention.effective("orders")["cleanup.policy"][1] == "job step retention"
    compact = job.clean_config(("compact",)).for_topic("clicks")  # a delete topic: carried over
    assert compact.cleanup_policy == {"delete"} and compact.retention_ms == -1
    # The request a unit runs: the job's source and output, the unit's half, the job's selection.
    request = clean_request(job, ("retention",), now_ms=7, dry_run=True)
    assert (request.src.url, request.dst.url, request.now_ms, request.dry_run) == (
        job.source,
        job.output,
        7,
        True,
    )
    assert request.config.for_topic("orders") == orders and request.topics == job.selection
    tier = tier_request(job, now_ms=7)
    assert (tier.log_dir.url, tier.remote.url, tier.config, tier.now_ms) == (
        job.log_dir,
        job.remote,
        job.configs,
        7,
    )
    assert tier.now_chosen == (job.now_ms is not None)
    check = validate_request(job, now_ms=7)
    assert (check.path.url, check.against and check.against.url, check.now_ms) == (
        job.log_dir,
        job.source if job.cleans else None,
        7,
    )
    assert len(check.suites) == len(job.suites)


@pytest.mark.parametrize(
    ("change", "line", "reason"),
    [
        (("steps:", "stepz: [validate]\nsteps:"), 6, "unknown key 'stepz' in the job"),
        (
            ("[retention, compact, validate, tier, expire]", "[retention, compact, vacuum]"),
            6,
            "unknown step 'vacuum'",
        ),
        (
            ("[retention, compact, validate, tier, expire]", "[validate, compact]"),
            6,
            "cannot run after 'validate'",
        ),
        (("[retention, compact, validate, tier, expire]", "[compact, compact]"), 6, "named twice"),
        (("source: logs", "source: missing"), 2, "no such log directory"),
        (("remote: remote\n", ""), 5, "step 'tier' works on a remote tier: the job needs 'remote'"),
        (("output: out/{run}\n", ""), 5, "the job needs 'output'"),
        (("    retention.ms: -1", "    retention.ms: soon"), 9, "retention.ms='soon'"),
        (("    retention.ms: -1", "    retention.msec: 5"), 9, "unknown topic config 'retention.msec'"),
        (("  conf:", "  master: local[2]\n  confs:"), 15, "unknown key 'confs' in spark"),
        (("    spark.task", "    task"), 15, "not a Spark setting"),
        (("name: nightly", "name: night/ly"), 1, "use letters, digits"),
        (("spark:\n", "airflow: {start_date: '1700000000000'}\nspark:\n"), 13, "expected an ISO-8601 date"),
        (
            (
                "      cleanup.policy: compact",
                "      cleanup.policy: compact\n      max.compaction.lag.ms: 5\n      min.compaction.lag.ms: 9",
            ),
            8,
            "max.compaction.lag.ms must be",
        ),
        (("name: nightly\n", ""), 1, "the job needs 'name'"),
        (("topics: [orders", "topics: [7, orders"), 5, None),  # a number is a name like any other
        (("name: nightly\n", "name: nightly\nkafka_tier_from_bucket: true\n"), 2, "give kafka_tier too"),
        (("name: nightly\n", "name: nightly\nkafka_tier_from_bucket: maybe\n"), 2, "must be true or false"),
    ],
)
def test_a_bad_job_file_is_refused_with_its_line(
    tmp_path: Path, change: tuple[str, str], line: int, reason: str | None
) -> None:
    path = _job(tmp_path, GOOD.replace(*change, 1))
    if reason is None:
        load_job_file(str(path))
        return
    with pytest.raises(ConfigError) as caught:
        load_job_file(str(path))
    assert str(caught.value).startswith(f"{path}:{line}: "), str(caught.value)
    assert reason in str(caught.value)


def test_a_kafka_tier_read_from_its_bucket_is_the_source_every_step_reads(tmp_path: Path) -> None:
    from segment_io.kafka_tier.url import url_params

    (tmp_path / "server.properties").write_text("")
    text = "name: rebuild\nsource: logs\noutput: out\nsteps: [compact]\nkafka_tier: server.properties\n"
    job = load_job_file(str(_job(tmp_path, text + "kafka_tier_from_bucket: true\n")))
    given = url_params(job.source)
    assert given["from_bucket"] == "1" and given["local"] == str(tmp_path / "logs")
    assert "from_bucket" not in url_params(load_job_file(str(_job(tmp_path, text))).source)


def test_a_tiered_brokers_log_directory_as_a_source_needs_its_tier(tmp_path: Path) -> None:
    import shutil

    from tests.kip405 import KIP405, PLAIN

    shutil.copytree(KIP405 / PLAIN / "logdir", tmp_path / "broker")
    text = "name: rebuild\nsource: broker\noutput: out\nsteps: [compact]\n"
    with pytest.raises(
        ConfigError, match=r"job.yaml:2: .*holds __remote_log_metadata.*a job file.s kafka_tier"
    ):
        load_job_file(str(_job(tmp_path, text)))


def test_paths_with_run_need_a_run_name(tmp_path: Path) -> None:
    job = load_job_file(str(_job(tmp_path, GOOD)))
    with pytest.raises(ConfigError, match="--run NAME"):
        job.for_run(None)
    with pytest.raises(ConfigError, match="letters, digits"):
        job.for_run("../x")


def test_a_state_file_belongs_to_one_job_definition(tmp_path: Path) -> None:
    path = _job(tmp_path, GOOD)
    job = load_job_file(str(path)).for_run("r1")
    state = open_state(job.state, job.name, job.digest, "r1", 1_700_000_000_000)
    state.record(("retention", "compact"), {"state": "done", "finished": "t"})
    again = open_state(job.state, job.name, job.digest, "r1", 1_800_000_000_000)
    assert again.now_ms == 1_700_000_000_000 and again.done("compact") and not again.done("validate")
    # Comments and layout do not change the definition; what the job does does.
    path.write_text("# nightly\n" + GOOD)
    assert load_job_file(str(path)).digest == job.digest
    path.write_text(GOOD.replace("retention.ms: -1", "retention.ms: 5"))
    changed = load_job_file(str(path)).for_run("r1")
    with pytest.raises(ConfigError, match="job file changed"):
        open_state(changed.state, changed.name, changed.digest, "r1", 0)


def test_the_readme_documents_the_schema() -> None:
    readme = (REPO / "README.md").read_text()
    for row in schema_table()[2:]:
        key = re.match(r"\| `([^`]+)`", row)
        assert key and row in readme, f"README's job-file table lacks or differs at {key and key.group(1)}"


def test_every_bundled_job_file_loads() -> None:
    jobs = sorted((REPO / "conf" / "jobs").glob("*.yaml"))
    assert jobs
    for path in jobs:
        assert load_job_file(str(path)).name


def test_an_erase_step_goes_first_and_needs_its_key_list(tmp_path: Path) -> None:
    from pipelines.run.runner import erase_request

    (tmp_path / "keys.txt").write_text("k1\n")
    text = GOOD.replace("steps: [retention,", "steps: [erase, retention,") + "erase:\n  keys: keys.txt\n"
    job = load_job_file(str(_job(tmp_path, text))).for_run("r1")
    assert job.units()[:2] == [("erase",), ("retention", "compact")]
    assert (
        job.erased_dir == str(tmp_path / "out" / "r1.erased") == clean_request(job, job.units()[1], 0).src.url
    )
    erase = erase_request(job)
    assert (erase.src.url, erase.dst.url, erase.keys) == (
        job.source,
        job.erased_dir,
        str(tmp_path / "keys.txt"),
    )
    assert validate_request(job, 0).against == Location(
        job.erased_dir
    )  # the clean's promise, against what it read
    only = load_job_file(
        str(
            _job(
                tmp_path,
                "name: e\nsource: logs\noutput: out\nsteps: [erase]\n"
                "erase: {keys: keys.txt, key_format: hex}\n",
            )
        )
    )
    assert only.erased_dir == str(tmp_path / "out") and only.log_dir == only.erased_dir
    for bad, reason in [
        (GOOD.replace("steps: [retention,", "steps: [erase, retention,"), "go together"),
        (GOOD + "erase:\n  keys: keys.txt\n", "go together"),
        (GOOD.replace("steps: [retention,", "steps: [retention, erase,"), "cannot run after"),
        (text.replace("keys: keys.txt", "keys: missing.txt"), "no such file"),
        (text.replace("keys: keys.txt", "keys: keys.txt\n  key_format: rot13"), "expected one of"),
    ]:
        with pytest.raises(ConfigError, match=reason):
            load_job_file(str(_job(tmp_path, bad)))


def test_a_cut_step_writes_beside_the_output_where_a_later_step_reads_it(tmp_path: Path) -> None:
    base = f"name: j\nsource: {tmp_path}\noutput: out\n"
    path = tmp_path / "job.yaml"
    path.write_text(
        base + "steps: [cut, erase, compact]\ncut: {until_time: 2026-11-20T09:12:00Z}\n"
        "erase: {keys: keys.txt}\n"
    )
    (tmp_path / "keys.txt").write_text("k\n")
    job = load_job_file(str(path), check_source=False)
    assert job.cut is not None and job.cut.until_time == 1_795_165_920_000
    assert (job.cut_dir, job.erase_source, job.erased_dir, job.clean_source) == (
        str(tmp_path / "out.cut"),
        str(tmp_path / "out.cut"),
        str(tmp_path / "out.erased"),
        str(tmp_path / "out.erased"),
    )
    path.write_text(base + "steps: [cut]\ncut: {until_offset: 1500}\n")
    alone = load_job_file(str(path), check_source=False)
    assert (alone.cut_dir, alone.log_dir) == (str(tmp_path / "out"), str(tmp_path / "out"))


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("steps: [cut]\n", "the cut step and the 'cut' map"),
        ("steps: [compact]\ncut: {until_offset: 5}\n", "the cut step and the 'cut' map"),
        ("steps: [cut]\ncut: {}\n", "exactly one of until_offset and until_time"),
        ("steps: [cut]\ncut: {until_offset: 5, until_time: 2026-11-20}\n", "exactly one of"),
        ("steps: [cut]\ncut: {until_offset: -5}\n", "an offset"),
        ("steps: [cut]\ncut: {until_time: soon}\n", "ISO-8601"),
        ("steps: [compact, cut]\ncut: {until_offset: 5}\n", "order"),
    ],
)
def test_a_cut_step_is_refused_where_it_cannot_run(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(f"name: j\nsource: {tmp_path}\noutput: out\n" + text)
    with pytest.raises(ConfigError, match=reason):
        load_job_file(str(path), check_source=False)


IN_PLACE = """\
name: changelog-compaction
source: logs
kafka_tier: server.properties
in_place:
  bootstrap_server: 127.0.0.1:9092
  grace_ms: 5000
steps: [compact]
configs:
  topics:
    orders:
      cleanup.policy: compact
"""


def test_a_job_in_place_compacts_the_source_tier_once_per_run(tmp_path: Path) -> None:
    from segment_io.kafka_tier.url import url_params

    (tmp_path / "server.properties").write_text("")
    job = load_job_file(str(_job(tmp_path, IN_PLACE))).for_run("20261201")
    assert job.in_place is not None and job.in_place.grace_ms == 5000
    given = url_params(job.source)
    assert given["bootstrap"] == "127.0.0.1:9092" and given["local"] == str(tmp_path / "logs")
    assert job.output is None and job.state == str(tmp_path / "logs.20261201.run.json")
    request = clean_request(job, ("compact",), 1_700_000_000_000)
    assert request.dst is None and request.src.url == job.source  # the tier itself, in place
    assert request.config.for_topic("orders").compact
    from pipelines.run.outputs import step_inputs, step_output

    assert step_output(job, "compact") is None and step_inputs(job, ("compact",)) == [job.source]
    with pytest.raises(ConfigError, match="--run"):  # each scheduled run compacts anew
        load_job_file(str(_job(tmp_path, IN_PLACE))).for_run(None)


@pytest.mark.parametrize(
    ("change", "line", "reason"),
    [
        (("kafka_tier: server.properties\n", ""), 4, "give kafka_tier"),
        (("  bootstrap_server: 127.0.0.1:9092\n", ""), 5, "needs 'bootstrap_server'"),
        (("steps: [compact]", "steps: [retention, compact]"), 7, "names only compact (not retention)"),
        (("steps: [compact]", "steps: [compact, validate]"), 7, "(not validate)"),
        (("name: changelog-compaction\n", "name: changelog-compaction\noutput: out\n"), 2, "no 'output'"),
        (("  grace_ms: 5000", "  grace_ms: -1"), 6, "in_place.grace_ms must be an integer ≥ 0"),
        (
            (
                "kafka_tier: server.properties\n",
                "kafka_tier: server.properties\nkafka_tier_from_bucket: true\n",
            ),
            4,
            "not with kafka_tier_from_bucket",
        ),
    ],
)
def test_a_job_in_place_is_refused_where_it_cannot_run(
    tmp_path: Path, change: tuple[str, str], line: int, reason: str
) -> None:
    (tmp_path / "server.properties").write_text("")
    path = _job(tmp_path, IN_PLACE.replace(*change, 1))
    with pytest.raises(ConfigError) as caught:
        load_job_file(str(path))
    assert str(caught.value).startswith(f"{path}:{line}: "), str(caught.value)
    assert reason in str(caught.value)
