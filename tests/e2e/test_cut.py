"""`segpipe cut` as operators run it: every partition truncated as Kafka truncates a log (whole
batches, later segments gone), the segments below the cut byte for byte and the one it falls in a
byte prefix of its source; snapshots, leader epochs and root checkpoints lowered to the new end;
transactions open at the cut named; `--until-time` cut where ListOffsets points; a clean of the
result; refusals and kills that lose nothing."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pytest

from segment_io.exit_codes import ExitCode
from segment_io.layout import META_DIR
from segment_io.producer_snapshot import read_snapshot
from tests.helpers import dumped, files_of, run_segpipe

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
UNTIL = 1500


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The samples, with producer snapshots and leader epochs on both sides of the cut and a log
    start offset checkpoint."""
    root = tmp_path_factory.mktemp("cut") / "src"
    shutil.copytree(ROOT / "data" / "samples", root)
    for offset in (900, 1300, 2600):  # unreadable: the cut passes over them, as the broker does
        (root / "orders-0" / f"{offset:020d}.snapshot").write_bytes(b"snapshot")
    (root / "orders-0" / "leader-epoch-checkpoint").write_text("0\n3\n0 0\n1 1200\n2 1600\n")
    (root / "log-start-offset-checkpoint").write_text("0\n2\norders 0 0\nclicks 0 0\n")
    return root


def checkpoint(path: Path) -> dict[str, int]:
    lines = path.read_text().splitlines()[2:]
    return {f"{topic}-{number}": int(offset) for topic, number, offset in (line.split() for line in lines)}


@pytest.fixture(scope="module")
def cut(src: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cut-out") / "out"
    proc = run_segpipe("cut", str(src), str(out), "--until-offset", str(UNTIL))
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert "transactions left open" in proc.stdout
    assert "the log itself is used instead" in proc.stdout  # the unreadable snapshots, warned of
    return out


def test_every_partition_keeps_exactly_the_batches_below_the_cut(src: Path, cut: Path) -> None:
    before, after = dumped(src), dumped(cut)
    assert set(after) == set(before)
    for name, rows in before.items():
        kept = [r for r in rows if r["batch_last_offset"] < UNTIL]
        assert after.get(name, []) == kept, name
        assert any(r["batch_last_offset"] >= UNTIL for r in rows) or name == "legacy-users-0"


def test_segments_below_are_copied_and_the_one_cut_is_a_prefix(src: Path, cut: Path) -> None:
    for part in sorted(p.name for p in src.iterdir() if p.is_dir()):
        bases = sorted(int(p.stem) for p in (src / part).glob("*.log"))
        kept = sorted(int(p.stem) for p in (cut / part).glob("*.log"))
        assert kept == [b for b in bases if b <= UNTIL], part
        for base in kept:
            name = f"{base:020d}"
            src_log, out_log = (
                (src / part / f"{name}.log").read_bytes(),
                (cut / part / f"{name}.log").read_bytes(),
            )
            if base == kept[-1] and len(out_log) < len(src_log):
                assert src_log.startswith(out_log), part
            else:
                for suffix in (".log", ".index", ".timeindex", ".txnindex"):
                    a, b = src / part / f"{name}{suffix}", cut / part / f"{name}{suffix}"
                    assert a.exists() == b.exists() and (not a.exists() or a.read_bytes() == b.read_bytes())


def test_side_files_end_at_the_new_log_end(src: Path, cut: Path) -> None:
    report = json.loads((cut / META_DIR / "report.json").read_text())
    ends = {p["partition"]: p["log_end_offset"] for p in report["partitions"]}
    assert ends["orders-0"] == UNTIL  # the cut falls between two batches there
    assert sorted(p.name for p in (cut / "orders-0").glob("*.snapshot")) == [
        f"{o:020d}.snapshot"
        for o in (900, 1300, UNTIL)  # the broker's state at the new end, added
    ]
    assert (cut / "orders-0" / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n1 1200\n"
    for name in (
        "recovery-point-offset-checkpoint",
        "replication-offset-checkpoint",
        "log-start-offset-checkpoint",
    ):
        source, lowered = checkpoint(src / name), checkpoint(cut / name)
        assert lowered == {tp: min(offset, ends[tp]) for tp, offset in source.items()}, name
    # A partition the cut does not reach keeps every file as it is.
    assert files_of(cut / "legacy-users-0") == files_of(src / "legacy-users-0")
    assert run_segpipe("validate", str(cut)).returncode == ExitCode.OK


def test_transactions_open_at_the_cut_are_named(src: Path, cut: Path) -> None:
    report = json.loads((cut / META_DIR / "report.json").read_text())
    for part in report["partitions"]:
        rows = [r for r in dumped(cut).get(part["partition"], [])]
        open_since: dict[int, int] = {}
        for r in rows:
            if r["is_transactional"] and r["is_control"]:
                open_since.pop(r["producer_id"], None)
            elif r["is_transactional"]:
                open_since.setdefault(r["producer_id"], r["batch_base_offset"])
        named = {t["producer_id"]: t["first_offset"] for t in part["open_transactions"]}
        assert named == open_since, part["partition"]
        end = part["log_end_offset"]
        if end < part["log_end_offset_before"]:  # the producer state at the end names the same
            path = cut / part["partition"] / f"{end:020d}.snapshot"
            state = read_snapshot(path.read_bytes(), str(path))
            assert {p: e.txn_first_offset for p, e in state.items() if e.txn_first_offset >= 0} == named
    assert any(p["open_transactions"] for p in report["partitions"])


def test_until_time_cuts_where_list_offsets_points(src: Path, tmp_path: Path) -> None:
    at, iso = 1_700_300_000_000, "2023-11-18T09:33:20Z"  # the same moment
    listed = json.loads(run_segpipe("inspect", str(src), "--at", str(at), "--json").stdout)["partitions"]
    offsets = {f"{p['topic']}-{p['partition']}": p["offset"] for p in listed}
    proc = run_segpipe("cut", str(src), str(tmp_path / "out"), "--until-time", iso)
    assert proc.returncode == ExitCode.OK, proc.stderr
    before, after = dumped(src), dumped(tmp_path / "out")
    for name, rows in before.items():
        offset = offsets[name]
        kept = rows if offset is None else [r for r in rows if r["batch_last_offset"] < offset]
        assert after.get(name, []) == kept, name


def test_a_cut_log_cleans_and_validates(cut: Path, tmp_path: Path) -> None:
    cleaned = tmp_path / "cleaned"
    proc = run_segpipe(
        "clean", str(cut), str(cleaned), "--config", "conf/samples.yaml", "--now", "2023-11-23", "--validate"
    )
    assert proc.returncode == ExitCode.OK, proc.stderr


def test_a_dry_run_writes_nothing_and_refusals_come_first(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    dry = run_segpipe("cut", str(src), str(out), "--until-offset", "10", "--dry-run")
    assert dry.returncode == ExitCode.OK and "would cut" in dry.stdout and not out.exists()
    both = run_segpipe("cut", str(src), str(out), "--until-offset", "10", "--until-time", "2023-11-18")
    assert both.returncode == ExitCode.REFUSED and "not allowed with" in both.stderr, both.stderr
    neither = run_segpipe("cut", str(src), str(out))
    assert neither.returncode == ExitCode.REFUSED
    out.mkdir()
    (out / "x").write_text("x")
    busy = run_segpipe("cut", str(src), str(out), "--until-offset", "10")
    assert busy.returncode == ExitCode.REFUSED and (out / "x").read_text() == "x"


@pytest.mark.parametrize("stage", ["mid-rewrite", "before-publish"])
def test_a_kill_loses_nothing(src: Path, cut: Path, tmp_path: Path, stage: str) -> None:
    before = files_of(src)
    killed = run_segpipe("cut", str(src), str(tmp_path / "out"), "--until-offset", str(UNTIL), fault=stage)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert files_of(src) == before and not (tmp_path / "out").exists()
    again = run_segpipe("cut", str(src), str(tmp_path / "out"), "--until-offset", str(UNTIL))
    assert again.returncode == ExitCode.OK, again.stderr
    assert {k: v for k, v in files_of(tmp_path / "out").items() if META_DIR not in k} == {
        k: v for k, v in files_of(cut).items() if META_DIR not in k
    }


def test_the_readme_cut_example_runs(tmp_path: Path) -> None:
    """The README's cut commands as written (their /tmp paths moved into the test's own), all but
    the restore into a broker's directory (tests/kafka/test_cut_broker.py restores one)."""
    import re

    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### The log as it was") :]
    [block] = re.findall(r"```sh\n(.*?)```", section[: section.index("\n### ")], re.DOTALL)
    commands = [line.split("  #")[0].split() for line in block.splitlines() if line.startswith("segpipe ")]
    assert [c[1] for c in commands] == ["inspect", "cut", "clean", "restore-kafka"]
    for command in commands[:3]:
        args = [a.replace("/tmp/", f"{tmp_path}/") for a in command[1:]]
        proc = run_segpipe(*args)
        assert proc.returncode == ExitCode.OK, (command, proc.stderr)
    assert (tmp_path / "as-it-was-cleaned" / META_DIR / "manifest.json").exists()


def test_times_that_are_not_times_are_refused_and_an_emptied_partition_is_named(
    src: Path, tmp_path: Path
) -> None:

    out = tmp_path / "out"
    for sentinel in ("-1", "-2", "-5"):
        proc = run_segpipe("cut", str(src), str(out), "--until-time", sentinel)
        assert proc.returncode == ExitCode.REFUSED and "-1 means the latest offset" in proc.stderr, (
            proc.stderr
        )
        at = run_segpipe("inspect", str(src), "--at", sentinel)
        assert at.returncode == ExitCode.REFUSED and "-2 the earliest" in at.stderr, at.stderr
    seconds = run_segpipe("cut", str(src), str(out), "--until-time", "1700300000")
    assert seconds.returncode == ExitCode.REFUSED and "looks like epoch seconds" in seconds.stderr
    assert "give 1700300000000" in seconds.stderr and not out.exists()
    # Before every record of orders-0 but after clicks-0 starts: orders-0 is emptied, and said so.
    first = dumped(src)["orders-0"][0]["timestamp"]
    emptied = run_segpipe("cut", str(src), str(out), "--until-time", str(first), "--topic", "orders")
    assert emptied.returncode == ExitCode.OK, emptied.stderr
    assert "segpipe: warning: the cut leaves orders-0 empty" in emptied.stdout + emptied.stderr


def test_a_cut_past_the_end_leaves_no_transaction_open_that_was_not(src: Path, tmp_path: Path) -> None:
    proc = run_segpipe("cut", str(src), str(tmp_path / "out"), "--until-offset", "999999999", "--dry-run")
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert "0 transactions left open by the cut" in proc.stdout, proc.stdout
    assert "open in the source already" in proc.stdout
    assert "1 transactions" not in proc.stdout
