"""What `tier`, `restore` and `clean --in-place` refuse before any work (exit 2, one line, no
Spark started), and `dump`/`inspect` of a remote tier from the command line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from segment_io.exit_codes import ExitCode
from tests.helpers import run_segpipe

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tier", "{log}", "{log}/tier"], "is inside the source"),
        (["tier", "{missing}", "{tmp}/tier"], "log directory not found"),
        (["tier", "{log}"], "tier takes two arguments"),
        (["tier", "--expire", "{tmp}/a", "{tmp}/b"], "takes one argument"),
        (["tier", "--expire", "{log}"], "is not a remote tier"),
        (["tier", "{log}", "{tmp}/tier", "--max-bytes-per-second", "0"], "must be a positive number"),
        (
            ["tier", "{log}", "{tmp}/tier", "--set", "local.retention.ms=-3"],
            "local.retention.ms='-3' must be",
        ),
        (
            ["tier", "{log}", "{tmp}/tier", "--set", "retention.ms=1000", "--set", "local.retention.ms=2000"],
            "must not be more than retention.ms",
        ),
        (["restore", "{log}", "{tmp}/out"], "is not a remote tier"),
        (["clean", "{log}", "--in-place"], "is not a remote tier"),
        (["clean", "{log}"], "needs SRC and DST"),
        (["tier", "--expire", "{tmp}/tier", "--now", "2023-11-23"], "does not take --now"),
        (
            ["tier", "--expire", "{tmp}/tier", "--json", "--master", "local[1]"],
            "does not take --json, --master",
        ),
        (["tier", "{log}", "{log}-elsewhere"], "is not empty and not a remote tier"),
        (
            ["dump", "{log}", "--from-offset", "100", "--to-offset", "50"],
            "--from-offset 100 is above --to-offset 50",
        ),
        (["dump", "{log}", "--from-time", "2023-11-24", "--to-time", "2023-11-23"], "is above --to-time"),
    ],
)
def test_refused_before_any_work(args: list[str], message: str, sample_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "log"
    shutil.copytree(sample_dir, log)
    shutil.copytree(sample_dir, tmp_path / "log-elsewhere")  # data that is not a tier
    values = {"log": str(log), "tmp": str(tmp_path), "missing": str(tmp_path / "missing")}
    proc = run_segpipe(*[a.format(**values) for a in args])
    assert proc.returncode == ExitCode.REFUSED, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "tier").exists() and not (tmp_path / "out").exists()


def test_a_dry_run_speaks_in_the_conditional_and_writes_nothing(sample_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "log"
    shutil.copytree(sample_dir / "orders-0", log / "orders-0")
    args = [
        "tier",
        str(log / "orders-0"),
        str(tmp_path / "tier"),
        "--dry-run",
        "--now",
        "2023-11-26",
        "--set",
        "retention.ms=-1",
        "--set",
        "local.retention.ms=0",
        "--master",
        "local[1]",
    ]
    table = run_segpipe(*args)
    assert table.returncode == ExitCode.OK, table.stderr[-2000:]
    lines = table.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("partition"))
    assert "would upload" in lines[header] and lines[header + 1].split()[:3] == ["orders-0", "0", "3015"]
    assert "segpipe: 1 partition; dry run: would upload 4 segments" in table.stdout + table.stderr
    machine = run_segpipe(*args, "--json")
    plan = json.loads(machine.stdout[machine.stdout.index("{") : machine.stdout.rindex("}") + 1])
    assert [p["partition"] for p in plan["partitions"]] == ["orders-0"] and len(
        plan["partitions"][0]["upload"]
    ) == 4
    assert not (tmp_path / "tier").exists()


def test_an_open_transaction_that_holds_a_partition_back_is_named(sample_dir: Path, tmp_path: Path) -> None:
    """The samples' orders partitions each end in a transaction with no marker: with the last segment
    sealed, it is what keeps the rest of the partition from cleaning and from tiering, and one line
    per partition says so with the producer id and the first offset."""
    sealed = [
        "--config",
        "conf/samples.yaml",
        "--now",
        "2023-11-23",
        "--set",
        "segpipe.last.segment.sealed=true",
    ]
    for args in (
        ["clean", str(sample_dir), str(tmp_path / "out"), *sealed, "--dry-run"],
        ["tier", str(sample_dir), str(tmp_path / "tier"), *sealed, "--dry-run"],
    ):
        proc = run_segpipe(*args)
        assert proc.returncode == ExitCode.OK, proc.stderr
        said = proc.stdout + proc.stderr
        what = "cleaning" if args[0] == "clean" else "tiering"
        for part, pid, first in (("orders-0", 1015, 2783), ("orders-1", 1013, 2988)):
            line = (
                f"segpipe: warning: {part}: an open transaction (producer id {pid}, first offset {first}) "
                f"keeps offsets {first} and above from {what}"
            )
            assert said.count(line) == 1, said


def test_erase_in_place_of_a_tier_on_a_local_path(sample_dir: Path, tmp_path: Path) -> None:
    """A remote tier on a local path is erased in place as one in a bucket is (it was refused as a
    log directory "a tier was written into by mistake"): the listed key's records are gone, every
    other record stays."""
    import base64

    from tests.helpers import dumped

    log, tier = tmp_path / "log", tmp_path / "tier"
    shutil.copytree(sample_dir, log)
    tiered = run_segpipe("tier", str(log), str(tier), "--set", "retention.ms=-1", "--now-ms", "1700700000000")
    assert tiered.returncode == ExitCode.OK, tiered.stderr
    key = base64.b64encode(b"k0000000001").decode()
    before = dumped(tier)
    (tmp_path / "keys.txt").write_text("k0000000001\n")
    erased = run_segpipe("erase", str(tier), "--in-place", "--keys", str(tmp_path / "keys.txt"))
    assert erased.returncode == ExitCode.OK, erased.stderr
    after = dumped(tier)

    def records(rows: list[dict[str, object]]) -> list[tuple[object, ...]]:  # what a consumer reads
        return [tuple(r[f] for f in ("offset", "timestamp", "key", "value", "headers")) for r in rows]

    assert sum(r["key"] == key for rows in before.values() for r in rows) > 0
    assert {p: records([r for r in rows if r["key"] != key]) for p, rows in before.items()} == {
        p: records(rows) for p, rows in after.items()
    }
