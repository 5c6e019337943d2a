"""`segpipe`: the command line. Every command module adds its parser; errors become exit codes
here, in one place (pipelines.errors), with a one-line message and never a traceback (unless -v)."""

from __future__ import annotations

import argparse
import gc
import signal
import sys
import traceback
from collections.abc import Sequence

from pipelines.cli import (
    clean,
    config,
    console,
    cut,
    dump,
    erase,
    generate,
    inspect,
    restore_kafka,
    run,
    tier,
    validate,
)
from pipelines.cli.entry import stop_exit, terminate
from pipelines.cli.source_args import object_store_urls
from pipelines.cli.spark_args import workers_forked_early
from pipelines.errors import SegpipeError, Terminated
from pipelines.runtime import faults
from segment_io.exit_codes import MEANINGS, ExitCode


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"segpipe {version('segpipe')}"
    except PackageNotFoundError:
        return "segpipe (not installed)"


def build_parser() -> argparse.ArgumentParser:
    codes = "\n".join(f"  {code:>3}  {meaning}" for code, meaning in MEANINGS.items())
    parser = argparse.ArgumentParser(
        prog="segpipe",
        description="Kafka log archive maintenance",
        epilog=f"exit codes:\n{codes}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version())
    loud = parser.add_mutually_exclusive_group()
    loud.add_argument("-q", "--quiet", action="store_true", help="only warnings, totals and errors")
    loud.add_argument("-v", "--verbose", action="store_true", help="Spark's own log, and tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)
    inspect.add_parser(sub)
    dump.add_parser(sub)
    generate.add_parser(sub)
    clean.add_parser(sub)
    erase.add_parser(sub)
    cut.add_parser(sub)
    tier.add_parser(sub)
    restore_kafka.add_parser(sub)
    validate.add_parser(sub)
    run.add_parser(sub)
    config.add_parser(sub)
    return parser


# The packages of the object-store clients, whose own errors (credentials, a refused request) are the
# environment's: S3's (s3fs's botocore), GCS's (gcsfs and Google's auth library) and Azure's (adlfs
# and Azure's SDK).
STORE_CLIENTS = ("botocore", "aiobotocore", "gcsfs", "google", "adlfs", "azure")


def _from_storage(exc: BaseException) -> bool:
    """An error of the environment: the OS's, or the object-store client's own."""
    return isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in STORE_CLIENTS


def main(argv: Sequence[str] | None = None) -> int:
    """The command line `argv`, run: its exit code. A stop at any moment ends it as a stop."""
    signal.signal(signal.SIGTERM, terminate)
    if "pipelines.runtime.stop" in sys.modules:  # a process that ran a command before: a new run
        from pipelines.runtime.stop import begin_run

        begin_run()
    try:
        return _main(argv)
    except KeyboardInterrupt as exc:  # before a run's handlers, or while its error is reported
        return _stopped(isinstance(exc, Terminated))


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    console.set_level(console.QUIET if args.quiet else console.VERBOSE if args.verbose else console.NORMAL)
    faults.arm()
    # Until a run installs its own handlers (runtime.stop), SIGTERM stops the process as Ctrl-C
    # does (main): nothing has been written yet, and the scheduler is told 143, not killed.
    try:
        return _run(args)
    except Exception as exc:  # a bug: say what, keep the traceback for -v
        if args.verbose:
            traceback.print_exc()
        print(
            f"error: internal error: {type(exc).__name__}: {exc} (-v prints the traceback)", file=sys.stderr
        )
        return ExitCode.INTERNAL


def command() -> int:
    """The `segpipe` command: `main`, then every object of the process frozen out of the garbage
    collector, so that the interpreter's exit does not walk them all (measured 0.3 s a run; the
    exit still runs its atexit handlers, every output is already closed and published)."""
    code = main()
    gc.freeze()
    return code


def _signal_that_stopped() -> int | None:
    if "pipelines.runtime.stop" not in sys.modules:  # Spark never started
        return None
    from pipelines.runtime.stop import stopped_by

    return stopped_by()


def _stopped(terminated: bool) -> int:
    """The line and code a stopped run ends with: what it published before the stop, if anything."""
    done: list[str] = []
    if "pipelines.runtime.stop" in sys.modules:
        from pipelines.runtime.stop import published

        done = published()
    return stop_exit(terminated, done)


def _run(args: argparse.Namespace) -> int:
    try:
        with workers_forked_early(args):
            code = int(args.func(args))
        # A stop whose error a library swallowed (a cancelled Spark job's, inside great-expectations)
        # still ends the run as a stop: its result is not taken for the run's.
        signum = _signal_that_stopped()
        return code if signum is None else _stopped(signum == signal.SIGTERM)
    except SegpipeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        return _stopped(isinstance(exc, Terminated))
    except BrokenPipeError:  # the reader of our output went away (`segpipe dump | head`)
        return ExitCode.OK
    except Exception as exc:
        signum = _signal_that_stopped()
        if signum is not None:
            return _stopped(signum == signal.SIGTERM)
        if not _from_storage(exc):
            raise
        # Credentials, permissions, missing files, unreachable endpoints: the environment, not a bug.
        missing = _missing_bucket(args)
        cause = f"{missing} does not exist (the store said {type(exc).__name__}: {exc})" if missing else None
        print(f"error: {cause or f'{type(exc).__name__}: {exc}'}", file=sys.stderr)
        return ExitCode.REFUSED


def _missing_bucket(args: argparse.Namespace) -> str | None:
    """The bucket of an object-store URL among the command's arguments that does not exist: some
    stores answer a request into a missing bucket with an internal error that names nothing."""

    for url in object_store_urls(args):
        scheme, _, rest = url.partition("://")
        bucket = rest.split("/", 1)[0]
        try:
            import fsspec

            if bucket:
                fsspec.filesystem(scheme).info(bucket)
        except FileNotFoundError:
            return f"the bucket {bucket!r} of {url}"
        except Exception:  # credentials, network: the original error is what gets reported then
            continue
    return None
