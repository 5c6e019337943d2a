"""`clean --validate`: the gate publishes a sound output with its Data Docs inside, and a broken
one (the `corrupt-output` fault flips a byte of the staged output) not at all: exit 4, the failed
rule named, the Data Docs kept beside DST."""

from __future__ import annotations

from pathlib import Path

import pytest

from segment_io.exit_codes import ExitCode
from segment_io.layout import META_DIR
from tests.helpers import NO_JVM, flip_byte, run_segpipe

pytestmark = pytest.mark.e2e
FLAGS = ["--config", "conf/samples.yaml", "--now", "2023-11-23", "--master", "local[2]", "--validate"]


def test_the_gate_publishes_only_what_passes(sample_dir: Path, tmp_path: Path) -> None:
    good = run_segpipe("clean", str(sample_dir), str(tmp_path / "good"), *FLAGS)
    assert good.returncode == ExitCode.OK, good.stderr[-3000:]
    assert "validation passed" in good.stdout + good.stderr
    assert (tmp_path / "good" / META_DIR / "validation" / "index.html").exists()
    assert not (tmp_path / "good.validation").exists()

    bad = run_segpipe("clean", str(sample_dir), str(tmp_path / "bad"), *FLAGS, fault="corrupt-output")
    assert bad.returncode == ExitCode.VALIDATION, bad.stderr[-3000:]
    assert "validation failed: batches_crc_valid" in bad.stdout + bad.stderr
    last = bad.stderr.strip().splitlines()[-1]
    assert (
        last.startswith("error: validation failed")
        and str(tmp_path / "bad.validation" / "index.html") in last
    )
    assert not (tmp_path / "bad").exists() and not list(tmp_path.glob(".bad.segpipe-staging-*"))
    assert (tmp_path / "bad.validation" / "index.html").exists()


def test_partitions_left_out_for_bad_data_are_named_not_compared_and_only_where_the_source_is_bad(
    sample_dir: Path, tmp_path: Path
) -> None:
    import json
    import shutil

    src = tmp_path / "src"
    shutil.copytree(sample_dir, src)
    bad = sorted((src / "orders-0").glob("*.log"))[1]
    flip_byte(bad, 300)
    flags = [f for f in FLAGS if f != "--validate"]
    out = tmp_path / "out"
    cleaned = run_segpipe("clean", str(src), str(out), *flags, "--on-corrupt", "skip-partition", "--validate")
    assert cleaned.returncode == ExitCode.SKIPPED, cleaned.stderr[
        -3000:
    ]  # the gate passed: published, one partition short
    proc = run_segpipe("validate", str(out), "--against", str(src), "--master", "local[2]")
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    said = proc.stdout + proc.stderr
    assert "holds no orders-0" in said and "not compared: orders-0: the source's data is bad there" in said
    assert str(bad) in said and "Traceback" not in said and "WARN" not in said
    # A report that claims a partition was left out, where the source is sound, excuses nothing.
    report = out / META_DIR / "report.json"
    run = json.loads(report.read_text())
    run["skipped"].append({"partition": "clicks-0", "error": "claimed", "path": "", "position": 0})
    report.write_text(json.dumps(run))
    shutil.rmtree(out / "clicks-0")
    lying = run_segpipe("validate", str(out), "--against", str(src), "--master", "local[2]")
    assert lying.returncode == ExitCode.INVALID, lying.stderr[-3000:]
    assert "validation failed:" in lying.stdout and "partition clicks-0" in lying.stdout
    assert "not compared: clicks-0" not in lying.stdout


def test_a_promise_without_terms_is_refused_before_any_work(sample_dir: Path, tmp_path: Path) -> None:
    """A log that is no segpipe output records no configs or `now`: nothing can be promised."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(sample_dir, copy)
    proc = run_segpipe("validate", str(copy), "--against", str(sample_dir), "--master", "local[2]")
    assert proc.returncode == ExitCode.REFUSED, proc.stderr[-3000:]
    assert "--now and --config/--set/--topic-set" in proc.stderr and "Traceback" not in proc.stderr


def test_an_operators_suite_gates_publication(sample_dir: Path, tmp_path: Path) -> None:
    """`clean --validate --suite FILE`: the output is published only if the suite passes too."""
    import json

    doc = json.loads(Path("conf/suites/orders.json").read_text())
    doc["name"] = "orders-short"
    doc["expectations"][2]["kwargs"]["max_value"] = 10  # values are longer: every one fails
    strict = tmp_path / "strict.json"
    strict.write_text(json.dumps(doc))
    proc = run_segpipe("clean", str(sample_dir), str(tmp_path / "out"), *FLAGS, "--suite", str(strict))
    assert proc.returncode == ExitCode.VALIDATION, proc.stderr[-3000:]
    said = proc.stdout + proc.stderr
    assert (
        "validation failed: orders-short: expect_column_value_lengths_to_be_between(value): partition orders-"
        in said
    )
    assert not (tmp_path / "out").exists()
    refused = run_segpipe("clean", str(sample_dir), str(tmp_path / "x"), "--suite", str(strict))
    assert refused.returncode == ExitCode.REFUSED and "add --validate" in refused.stderr


def test_validating_a_small_local_log_starts_no_jvm(tmp_path: Path) -> None:
    """A JVM with a 1 KB heap cannot start: the validation of the samples (structure, and the
    promise of a retention-only clean of them) finishes without one; an operator suite, which
    reads records through the kafka-segments source, needs Spark and says it could not start."""
    samples = "data/samples"
    out = tmp_path / "out"
    clean = run_segpipe(
        "clean", samples, str(out), "--set", "cleanup.policy=delete", "--now", "2023-11-23", *NO_JVM
    )
    assert clean.returncode == ExitCode.OK, clean.stderr[-3000:]
    for extra in ([], ["--against", samples]):
        proc = run_segpipe("validate", str(out), *extra, *NO_JVM)
        assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
        assert "validation passed" in proc.stdout + proc.stderr
    suite = run_segpipe("validate", samples, "--suite", "conf/suites/orders.json", *NO_JVM)
    assert suite.returncode != ExitCode.OK and "validation passed" not in suite.stdout + suite.stderr


def test_a_suite_with_an_expectation_ge_cannot_build_is_refused_before_any_work(
    sample_dir: Path, tmp_path: Path
) -> None:
    import json

    doc = json.loads(Path("conf/suites/orders.json").read_text())
    doc["expectations"].append({"type": "expect_column_values_to_be_purple", "kwargs": {"column": "key"}})
    suite = tmp_path / "purple.json"
    suite.write_text(json.dumps(doc))
    checked = run_segpipe("validate", str(sample_dir), "--suite", str(suite), "--master", "local[2]")
    assert checked.returncode == ExitCode.REFUSED, checked.stderr[-3000:]
    assert "expect_column_values_to_be_purple" in checked.stderr and "validation passed" not in checked.stdout
    gated = run_segpipe("clean", str(sample_dir), str(tmp_path / "out"), *FLAGS, "--suite", str(suite))
    assert gated.returncode == ExitCode.REFUSED, gated.stderr[-3000:]
    assert "purple.json: expectation 4" in gated.stderr
    assert not (tmp_path / "out").exists()
