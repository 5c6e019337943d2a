"""A stop belongs to the run under way, not to the process: a signal during a publication is held
until the publication is done and then stops the run; a signal after a publication still stops it
(the process's later steps, its report); a new run starts with no stop."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from pipelines.errors import Terminated
from pipelines.runtime import stop
from pipelines.runtime.session import LazySpark
from pipelines.runtime.stop import interrupt_cancels_jobs, published, publishing

pytestmark = pytest.mark.unit


@pytest.fixture
def handled() -> Iterator[None]:
    """The run's stop handlers installed (no Spark: nothing to cancel), the defaults put back."""
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    interrupt_cancels_jobs(LazySpark(lambda: None))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])
        stop.begin_run()


def test_a_stop_during_a_publication_is_held_until_it_is_done(handled: None) -> None:
    finished = []
    with pytest.raises(Terminated), publishing("dst"):
        os.kill(os.getpid(), signal.SIGTERM)
        finished.append("the rename")  # the publication runs to its end
    assert finished == ["the rename"] and published() == ["dst"]


def test_a_stop_after_one_publication_still_stops_the_run(handled: None) -> None:
    with publishing("first step's output"):
        pass
    with pytest.raises(KeyboardInterrupt) as stopped:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # the handler runs at the next bytecode boundary
            pass
    assert not isinstance(stopped.value, Terminated)
    assert stop.stopped_by() == signal.SIGINT
    # The next publication of a stopped run does not begin.
    with pytest.raises(KeyboardInterrupt), publishing("second step's output"):
        raise AssertionError("a stopped run published")
    assert published() == ["first step's output"]


def test_a_new_run_starts_with_no_stop(handled: None) -> None:
    with pytest.raises(Terminated), publishing("a"):
        os.kill(os.getpid(), signal.SIGTERM)
    stop.begin_run()
    assert stop.stopped_by() is None and published() == []
    with publishing("b"):
        pass
    assert published() == ["b"]


def _swallowed_in_a_spark_call(signum: int) -> None:
    """The stop signal arriving while the main thread waits in a call to Spark (a frame of py4j's),
    where the handler lets the cancelled call end the wait instead, and a library that swallows
    that error and goes on (as great-expectations reports a rule's error as its failure)."""
    code = "try:\n    signal.raise_signal(signum)\nexcept BaseException:\n    pass\n"
    exec(
        compile(code, "py4j/java_gateway.py", "exec"),
        {"__name__": "py4j.java_gateway", "signal": signal, "signum": signum},
    )


def test_a_stop_a_library_swallowed_still_ends_the_command_as_a_stop(
    handled: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command's own result (a validation that "passed") is not taken for the run's: 143."""
    from pipelines.cli import config, main

    def swallowing(args: object) -> int:
        interrupt_cancels_jobs(LazySpark(lambda: None))  # as a command's run installs them
        _swallowed_in_a_spark_call(signal.SIGTERM)
        print("segpipe: validation passed")
        return 0

    monkeypatch.setattr(config, "run_describe", swallowing)
    code = main.main(["config", "describe"])
    err = capsys.readouterr().err
    assert code == 143 and err.strip().splitlines()[-1] == "segpipe: terminated; nothing was published"


def test_a_job_that_returns_after_a_swallowed_stop_is_stopped_at_its_end(handled: None) -> None:
    from pipelines.output.harness import job_run

    with pytest.raises(Terminated), job_run(LazySpark(lambda: None), ()):
        _swallowed_in_a_spark_call(signal.SIGTERM)
        result = "passed"  # the job's body runs on to its end
    assert result == "passed"


def test_a_stop_before_the_run_has_handlers_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C while the command line is still parsed: 130 and one line, no traceback."""
    from pipelines.cli import main

    def interrupted() -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(main, "build_parser", interrupted)
    assert main.main(["inspect", "x"]) == 130
    assert capsys.readouterr().err == "segpipe: interrupted; nothing was published\n"


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_a_stop_while_the_command_line_is_imported_is_one_line(signal_name: str) -> None:
    """The console script's first instant: the signal lands while the command's modules import."""
    import subprocess
    import sys

    hook = (
        "import signal, sys\n"
        "class Stop:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name == 'pipelines.cli.clean': signal.raise_signal(signal.{signal_name})\n"
        "sys.meta_path.insert(0, Stop())\n"
        "from pipelines.cli.entry import command\n"
        "sys.exit(command())\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", hook, "clean", "a", "b"], capture_output=True, text=True, timeout=120
    )
    said = "terminated" if signal_name == "SIGTERM" else "interrupted"
    assert proc.returncode == {"SIGINT": 130, "SIGTERM": 143}[signal_name], proc.stderr
    assert proc.stderr == f"segpipe: {said}; nothing was published\n"


def test_a_stop_held_by_a_publication_still_cancels_the_jobs_of_a_later_stop(handled: None) -> None:
    """The first signal lands during a publication (held); a second one after it starts the run's
    canceller all the same."""
    with pytest.raises(Terminated), publishing("dst"):
        os.kill(os.getpid(), signal.SIGTERM)
    assert not stop._cancelling  # held: nothing to cancel during the publication
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
    assert stop._cancelling
