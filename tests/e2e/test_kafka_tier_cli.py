"""The command line over a broker's log directory and its Kafka remote tier (`--kafka-tier`): what
it reads is every record the broker was sent; what it writes (clean, restore) is a plain log
directory holding them; a tier it cannot read is refused with the segment named and nothing
published."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from segment_io.errors import KafkaTierCorrupt, KafkaTierSettings
from segment_io.exit_codes import ExitCode
from segment_io.storage import LocalStorage
from tests.helpers import NO_JVM, run_segpipe
from tests.kip405 import ENCRYPTED, PLAIN, records, tier
from tests.unit.test_kafka_tier import other_key_pair

pytestmark = pytest.mark.e2e
NOW_MS = "1795722460000"


def dumped_records(*args: str) -> dict[tuple[int, int], tuple[bytes, bytes]]:
    proc = run_segpipe("dump", *args, "--topic", "kip405")
    assert proc.returncode == ExitCode.OK, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    return {
        (r["partition"], r["offset"]): (base64.b64decode(r["key"]), base64.b64decode(r["value"]))
        for r in rows
    }


def test_clean_of_a_tiered_topic_writes_the_cleaned_log(tmp_path: Path) -> None:
    t = tier(PLAIN, tmp_path)
    out = tmp_path / "cleaned"
    proc = run_segpipe(
        "clean",
        str(t.logdir),
        str(out),
        "--kafka-tier",
        str(t.settings),
        "--now-ms",
        NOW_MS,
        "--topic-set",
        "kip405:cleanup.policy=compact",
    )
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert records(LocalStorage(), str(out)) == t.produced  # every key is distinct: nothing superseded
    proc = run_segpipe(
        "validate", str(t.logdir), "--kafka-tier", str(t.settings), "--report", str(tmp_path / "v")
    )
    assert proc.returncode == ExitCode.OK, proc.stdout + proc.stderr


def test_erase_dry_run_names_the_remote_segments_that_hold_each_key(tmp_path: Path) -> None:
    t = tier(ENCRYPTED, tmp_path)
    keys = tmp_path / "keys.txt"
    keys.write_text("k-000000004\nk-000009999\n")
    report = tmp_path / "report.json"
    proc = run_segpipe(
        "erase",
        str(t.logdir),
        str(tmp_path / "out"),
        "--kafka-tier",
        str(t.settings),
        "--keys",
        str(keys),
        "--dry-run",
        "--report",
        str(report),
    )
    assert proc.returncode == ExitCode.OK, proc.stderr
    held = {
        p["partition"]: p["segments"]
        for item in json.loads(report.read_text())["erased"]
        for p in item["partitions"]
    }
    # record 4 is partition 0's offset 2 (the first segment); record 9999 partition 1's offset 4999.
    assert [Path(s).name.split("-")[0] for s in held["kip405-0"]] == ["00000000000000000000"]
    (segment,) = held["kip405-1"]
    assert segment.startswith(str(t.bucket)) and Path(segment).suffix == ".log"
    assert int(Path(segment).name.split("-")[0]) <= 4999


def test_a_tier_segpipe_cannot_read_is_refused_and_nothing_is_published(tmp_path: Path) -> None:
    t = tier(ENCRYPTED, tmp_path, keys=other_key_pair(tmp_path / "other"))
    out = tmp_path / "out"
    proc = run_segpipe("clean", str(t.logdir), str(out), "--kafka-tier", str(t.settings), "--now-ms", NOW_MS)
    assert proc.returncode == KafkaTierSettings.exit_code and "wrong key pair" in proc.stderr, proc.stderr
    assert not out.exists()
    t = tier(PLAIN, tmp_path, copy_bucket=True)
    log = sorted(t.bucket.rglob("*.log"))[5]
    log.write_bytes(log.read_bytes()[:-10])
    proc = run_segpipe("restore", str(t.logdir), str(out), "--kafka-tier", str(t.settings))
    assert proc.returncode == KafkaTierCorrupt.exit_code, proc.stderr
    assert str(log) in proc.stderr and "at byte" in proc.stderr
    assert not out.exists() or not any(out.iterdir())


def test_a_job_file_reads_its_source_with_the_kafka_tier(tmp_path: Path) -> None:
    t = tier(ENCRYPTED, tmp_path)
    job = tmp_path / "job.yaml"
    job.write_text(
        f"name: rebuild\nsource: {t.logdir}\nkafka_tier: {t.settings}\noutput: {tmp_path / 'out'}\n"
        f"steps: [compact]\nnow: {NOW_MS}\nconfigs:\n  defaults: {{cleanup.policy: compact}}\n"
    )
    proc = run_segpipe("run", str(job))
    assert proc.returncode == ExitCode.OK, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert records(LocalStorage(), str(tmp_path / "out")) == t.produced
    # Tiering the source itself (no output) is refused before any step runs.
    job.write_text(
        f"name: bad\nsource: {t.logdir}\nkafka_tier: {t.settings}\nremote: {tmp_path / 'r'}\nsteps: [tier]\n"
    )
    proc = run_segpipe("run", str(job))
    assert proc.returncode == ExitCode.REFUSED and "step 'tier' would work on the source" in proc.stderr, (
        proc.stderr
    )


def test_the_readme_documents_every_setting_read_and_its_walk_through_runs(tmp_path: Path) -> None:
    """The settings table is the one in settings.py; the rebuild commands run as written (their
    paths moved onto a fixture's, all but restore-kafka, which needs a stopped broker: it is
    tests/kafka/test_kafka_tier_broker.py's)."""
    from segment_io.kafka_tier.settings import TIER_SETTINGS

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("### Kafka's tiered storage") : readme.index("### Restoring into Kafka")]
    for setting in TIER_SETTINGS:
        assert f"| `{setting.name}` |" in section and setting.doc in section, setting.name
    t = tier(ENCRYPTED, tmp_path)
    block = section[section.index("```\n") + 4 :]
    block = block[: block.index("```")]
    for line in block.splitlines():
        command = line.split("#")[0].split()
        if command[1] == "restore-kafka":
            continue
        paths = {
            "/backup/kafka-logs": str(t.logdir),
            "/backup/server.properties": str(t.settings),
            "/tmp/orders-rebuilt": str(tmp_path / "rebuilt"),
            "orders": "kip405",
        }
        proc = run_segpipe(*[paths.get(word, word) for word in command[1:]])
        assert proc.returncode == ExitCode.OK, (line, proc.stderr)
        if command[1] == "inspect":
            assert proc.stdout.rstrip().endswith("valid") and "kip405-1" in proc.stdout
    # The rebuilt topic: a plain log directory of every record, without the tier's metadata.
    out = tmp_path / "rebuilt"
    assert records(LocalStorage(), str(out)) == t.produced
    assert not list(out.glob("__remote_log_metadata-*"))
    for name in ("kip405-0", "kip405-1"):
        assert (out / name / "leader-epoch-checkpoint").read_text().splitlines()[2:] == ["0 0"]
    assert run_segpipe("inspect", str(out)).returncode == ExitCode.OK
    # The rebuild from the bucket alone, as written: the same records.
    block = section[section.index("--from-bucket`** rebuilds") :]
    block = block[block.index("```\n") + 4 :]
    (line,) = block[: block.index("```")].splitlines()
    paths["/tmp/orders-rebuilt"] = str(tmp_path / "from-bucket")
    proc = run_segpipe(*[paths.get(word, word) for word in line.split()[1:]])
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert records(LocalStorage(), str(tmp_path / "from-bucket")) == t.produced


def test_cut_and_erase_of_a_tiered_topic_write_plain_logs(tmp_path: Path) -> None:
    """With a local master both work in the driver's own processes (the remote tier is not near,
    runtime.tasks.placement): given a JVM that cannot start (a 1 KB heap) they finish anyway."""
    t = tier(PLAIN, tmp_path)
    cut = tmp_path / "cut"
    proc = run_segpipe(
        "cut", str(t.logdir), str(cut), "--kafka-tier", str(t.settings), "--until-offset", "5000", *NO_JVM
    )
    assert proc.returncode == ExitCode.OK, proc.stderr
    kept = records(LocalStorage(), str(cut))
    assert max(offset for _, offset in kept) < 5000 and kept == {
        k: v for k, v in t.produced.items() if k in kept
    }
    keys = tmp_path / "keys.txt"
    keys.write_text("k-000000004\nk-000012345\n")
    erased = tmp_path / "erased"
    proc = run_segpipe(
        "erase", str(t.logdir), str(erased), "--kafka-tier", str(t.settings), "--keys", str(keys), *NO_JVM
    )
    assert proc.returncode == ExitCode.OK, proc.stderr
    left = records(LocalStorage(), str(erased))
    assert left == {k: v for k, v in t.produced.items() if v[0] not in (b"k-000000004", b"k-000012345")}


def test_a_tier_whose_metadata_is_gone_is_refused_by_every_reader(tmp_path: Path) -> None:
    """No read returns fewer records than the log holds with exit 0: dump, inspect, validate and
    restore all refuse, naming the offsets in neither tier; nothing is published."""
    import shutil

    t = tier(PLAIN, tmp_path, copy_logdir=True)
    shutil.rmtree(t.logdir / "__remote_log_metadata-0")
    tiered = ("--kafka-tier", str(t.settings))
    for args in (
        ("dump", str(t.logdir), *tiered, "--limit", "1"),
        ("inspect", str(t.logdir), *tiered),
        ("validate", str(t.logdir), *tiered, "--report", str(tmp_path / "v"), *NO_JVM),
        ("restore", str(t.logdir), str(tmp_path / "restored"), *tiered, *NO_JVM),
    ):
        proc = run_segpipe(*args)
        assert proc.returncode == ExitCode.DATA, (args, proc.stdout, proc.stderr)
        assert "offsets 0-19999 are in neither tier" in proc.stderr, proc.stderr
        assert f"{t.logdir}/kip405-0 (with its Kafka remote tier, {t.settings})" in proc.stderr
    assert not (tmp_path / "restored").exists()


def test_a_tiered_log_directory_read_without_its_tier_is_refused_or_warned_of(tmp_path: Path) -> None:
    t = tier(PLAIN, tmp_path)
    hint = "holds __remote_log_metadata: its broker keeps topics in Kafka's tiered storage"
    proc = run_segpipe("clean", str(t.logdir), str(tmp_path / "out"), "--now-ms", NOW_MS, *NO_JVM)
    assert proc.returncode == ExitCode.REFUSED and hint in proc.stderr, proc.stderr
    assert "kip405-0 starts at 0, its local segments at 20000" in proc.stderr
    assert "--kafka-tier SETTINGS" in proc.stderr and not (tmp_path / "out").exists()
    proc = run_segpipe("inspect", str(t.logdir))  # only looks: a warning, and the local part
    assert proc.returncode == ExitCode.OK and f"segpipe: warning: {t.logdir} {hint}" in proc.stderr


def _tamper(out: Path) -> None:
    """Drop one record's batch from the output's first segment (a record lost on the way)."""
    import struct

    log = sorted((out / "kip405-0").glob("*.log"))[0]
    data = log.read_bytes()
    first = 12 + struct.unpack(">i", data[8:12])[0]
    log.write_bytes(data[first:])
    for index in log.parent.glob(f"{log.stem}.*index"):
        index.unlink()


def test_outputs_made_from_a_tier_are_proved_against_that_tier(tmp_path: Path) -> None:
    """validate OUT --against LOG_DIR --kafka-tier S reads SRC with the tier (OUT, a plain log,
    as it is): the clean, the erase and the cut of a tier pass (a cut judged as SRC cut again at
    its manifest's offset, byte for byte), a tampered output fails."""
    t = tier(PLAIN, tmp_path)
    tiered = ("--kafka-tier", str(t.settings))
    cleaned = tmp_path / "cleaned"
    proc = run_segpipe(
        "clean",
        str(t.logdir),
        str(cleaned),
        *tiered,
        "--now-ms",
        NOW_MS,
        "--topic-set",
        "kip405:cleanup.policy=compact",
        *NO_JVM,
    )
    assert proc.returncode == ExitCode.OK, proc.stderr
    against = ("--against", str(t.logdir), *tiered, "--report", str(tmp_path / "v"))
    proc = run_segpipe("validate", str(cleaned), *against)
    assert proc.returncode == ExitCode.OK, proc.stdout + proc.stderr
    keys = tmp_path / "keys.txt"
    keys.write_text("k-000000004\nk-000012345\n")
    erased = tmp_path / "erased"
    proc = run_segpipe("erase", str(t.logdir), str(erased), *tiered, "--keys", str(keys), *NO_JVM)
    assert proc.returncode == ExitCode.OK, proc.stderr
    proc = run_segpipe("validate", str(erased), "--erased", str(keys), "--against", str(t.logdir), *tiered)
    assert proc.returncode == ExitCode.OK and "erasure proved" in proc.stdout, proc.stdout + proc.stderr
    cut = tmp_path / "cut"
    proc = run_segpipe("cut", str(t.logdir), str(cut), *tiered, "--until-offset", "5000", *NO_JVM)
    assert proc.returncode == ExitCode.OK, proc.stderr
    proc = run_segpipe("validate", str(cut), *against)
    assert proc.returncode == ExitCode.OK, proc.stdout + proc.stderr
    assert f"judged as {t.logdir} (with its Kafka remote tier, {t.settings}) cut again" in proc.stdout
    for out in (cleaned, erased, cut):
        _tamper(out)
    proc = run_segpipe("validate", str(erased), "--erased", str(keys), "--against", str(t.logdir), *tiered)
    assert proc.returncode == ExitCode.INVALID and "erasure proof failed" in proc.stdout, proc.stdout
    proc = run_segpipe("validate", str(cleaned), *against)
    assert proc.returncode == ExitCode.INVALID, proc.stdout + proc.stderr
    proc = run_segpipe("validate", str(cut), *against)
    assert proc.returncode == ExitCode.INVALID, proc.stdout + proc.stderr
    assert "cut_is_the_source_truncated" in proc.stdout and "segment 0:" in proc.stdout, proc.stdout


def test_outputs_of_a_tier_carry_the_root_files_that_apply_to_them(tmp_path: Path) -> None:
    """restore and erase write the log directory's identity (meta.properties) and root checkpoints
    without the partitions they do not hold (__remote_log_metadata), nor the broker's own state."""
    t = tier(PLAIN, tmp_path)
    keys = tmp_path / "keys.txt"
    keys.write_text("k-000000004\n")
    restored, erased = tmp_path / "restored", tmp_path / "erased"
    tiered = ("--kafka-tier", str(t.settings), *NO_JVM)
    assert run_segpipe("restore", str(t.logdir), str(restored), *tiered).returncode == ExitCode.OK
    assert (
        run_segpipe("erase", str(t.logdir), str(erased), *tiered, "--keys", str(keys)).returncode
        == ExitCode.OK
    )
    assert "__remote_log_metadata" in (t.logdir / "recovery-point-offset-checkpoint").read_text()
    for out in (restored, erased):
        assert (out / "meta.properties").read_bytes() == (t.logdir / "meta.properties").read_bytes()
        assert not (out / "bootstrap.checkpoint").exists()
        for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
            assert (out / name).read_text().splitlines()[1:] == ["1", "kip405 0 20000"], (out, name)


def test_an_erase_in_place_without_its_live_cluster_is_refused_before_any_work(tmp_path: Path) -> None:
    t = tier(PLAIN, tmp_path)
    keys = tmp_path / "keys.txt"
    keys.write_text("k-000000004\n")
    proc = run_segpipe(
        "erase", str(t.logdir), "--kafka-tier", str(t.settings), "--in-place", "--keys", str(keys)
    )
    assert proc.returncode == ExitCode.REFUSED, proc.stderr
    assert "works with the live cluster: give --bootstrap-server" in proc.stderr


def test_a_cut_that_lost_a_partition_fails_its_proof(tmp_path: Path) -> None:
    import shutil

    t = tier(ENCRYPTED, tmp_path)
    cut = tmp_path / "cut"
    tiered = ("--kafka-tier", str(t.settings))
    proc = run_segpipe("cut", str(t.logdir), str(cut), *tiered, "--until-offset", "3000", *NO_JVM)
    assert proc.returncode == ExitCode.OK, proc.stderr
    shutil.rmtree(cut / "kip405-1")
    proc = run_segpipe(
        "validate", str(cut), "--against", str(t.logdir), *tiered, "--report", str(tmp_path / "v")
    )
    assert proc.returncode == ExitCode.INVALID, proc.stdout + proc.stderr
    assert "the output holds no kip405-1, which the cut keeps" in proc.stdout, proc.stdout
